package recordbatch_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/recordbatch"
)

// captureBroker is the least of a Kafka broker a franz-go producer needs
// (ApiVersions, Metadata, InitProducerID, Produce), so tests can validate
// the exact bytes a real producer sends. It answers every Produce with
// success and keeps each partition's records.
type captureBroker struct {
	ln   net.Listener
	host string
	port int32
	wg   sync.WaitGroup

	mu struct {
		sync.Mutex
		records [][]byte // one entry per produced partition, in arrival order
		version []int16  // produce request version of each entry
		conns   []net.Conn
	}
}

// maxFrameBytes bounds a request frame the fake broker will read.
const maxFrameBytes = 16 << 20

func newCaptureBroker(t *testing.T) *captureBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	p, _ := strconv.Atoi(port)
	b := &captureBroker{ln: ln, host: host, port: int32(p)}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(func() {
		ln.Close()
		b.mu.Lock()
		for _, c := range b.mu.conns {
			c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	return b
}

func (b *captureBroker) addr() string { return net.JoinHostPort(b.host, strconv.Itoa(int(b.port))) }

func (b *captureBroker) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.mu.conns = append(b.mu.conns, c)
		b.mu.Unlock()
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer c.Close()
			_ = b.serve(c)
		}()
	}
}

func (b *captureBroker) captured() ([][]byte, []int16) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([][]byte(nil), b.mu.records...), append([]int16(nil), b.mu.version...)
}

func (b *captureBroker) serve(c net.Conn) error {
	be := binary.BigEndian
	for {
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return err
		}
		n := be.Uint32(size[:])
		if n < 10 || n > maxFrameBytes {
			return fmt.Errorf("frame of %d bytes", n)
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(c, frame); err != nil {
			return err
		}
		key, version, corr := int16(be.Uint16(frame)), int16(be.Uint16(frame[2:])), be.Uint32(frame[4:])
		body := frame[8:]
		if clientID := int16(be.Uint16(body)); clientID > 0 {
			body = body[2+int(clientID):]
		} else {
			body = body[2:]
		}
		req := kmsg.RequestForKey(key)
		if req == nil {
			return fmt.Errorf("unknown key %d", key)
		}
		req.SetVersion(version)
		if req.IsFlexible() {
			var err error
			if body, err = skipTags(body); err != nil {
				return err
			}
		}
		if err := req.ReadFrom(body); err != nil {
			return fmt.Errorf("key %d v%d: %w", key, version, err)
		}
		resp, err := b.handle(req)
		if err != nil {
			return err
		}
		if resp == nil { // acks=0
			continue
		}
		resp.SetVersion(version)
		out := be.AppendUint32(nil, 0)
		out = be.AppendUint32(out, corr)
		if resp.IsFlexible() && key != 18 { // ApiVersions answers with header v0
			out = append(out, 0)
		}
		out = resp.AppendTo(out)
		be.PutUint32(out, uint32(len(out)-4))
		if _, err := c.Write(out); err != nil {
			return err
		}
	}
}

func skipTags(b []byte) ([]byte, error) {
	n, m := binary.Uvarint(b)
	if m <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[m:]
	for ; n > 0; n-- {
		if _, m = binary.Uvarint(b); m <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[m:]
		size, m := binary.Uvarint(b)
		if m <= 0 || size > uint64(len(b)-m) {
			return nil, errors.New("bad tag size")
		}
		b = b[m+int(size):]
	}
	return b, nil
}

func (b *captureBroker) handle(req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		resp := r.ResponseKind().(*kmsg.ApiVersionsResponse)
		for _, k := range []struct{ key, min, max int16 }{{0, 3, 11}, {3, 0, 12}, {18, 0, 3}, {22, 0, 4}} {
			resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k.key, MinVersion: k.min, MaxVersion: k.max})
		}
		return resp, nil
	case *kmsg.MetadataRequest:
		resp := r.ResponseKind().(*kmsg.MetadataResponse)
		resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: b.host, Port: b.port}}
		resp.ControllerID = 0
		for _, rt := range r.Topics {
			if rt.Topic == nil {
				continue
			}
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = rt.Topic
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Leader, mp.Replicas, mp.ISR = 0, []int32{0}, []int32{0}
			mt.Partitions = []kmsg.MetadataResponseTopicPartition{mp}
			resp.Topics = append(resp.Topics, mt)
		}
		return resp, nil
	case *kmsg.InitProducerIDRequest:
		resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = 4242, 0
		return resp, nil
	case *kmsg.ProduceRequest:
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		b.mu.Lock()
		for _, t := range r.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				b.mu.records = append(b.mu.records, append([]byte(nil), p.Records...))
				b.mu.version = append(b.mu.version, r.Version)
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		b.mu.Unlock()
		if r.Acks == 0 {
			return nil, nil
		}
		return resp, nil
	}
	return nil, fmt.Errorf("unexpected request key %d", req.Key())
}

// TestValidateKgoProducerBatches validates the exact records a franz-go
// producer sends, for every codec, idempotent or not.
func TestValidateKgoProducerBatches(t *testing.T) {
	codecs := []struct {
		codec kgo.CompressionCodec
		want  recordbatch.Compression
	}{
		{kgo.NoCompression(), recordbatch.CompressionNone},
		{kgo.GzipCompression(), recordbatch.CompressionGzip},
		{kgo.SnappyCompression(), recordbatch.CompressionSnappy},
		{kgo.Lz4Compression(), recordbatch.CompressionLZ4},
		{kgo.ZstdCompression(), recordbatch.CompressionZstd},
	}
	for _, c := range codecs {
		for _, idempotent := range []bool{true, false} {
			t.Run(fmt.Sprintf("%v/idempotent=%v", c.want, idempotent), func(t *testing.T) {
				broker := newCaptureBroker(t)
				opts := []kgo.Opt{
					kgo.SeedBrokers(broker.addr()),
					kgo.DefaultProduceTopic("t"),
					kgo.ProducerBatchCompression(c.codec),
					kgo.ProducerLinger(0),
					kgo.MetadataMinAge(10 * time.Millisecond),
				}
				if !idempotent {
					opts = append(opts, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()))
				}
				cl, err := kgo.NewClient(opts...)
				if err != nil {
					t.Fatal(err)
				}
				defer cl.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // deadlock guard
				defer cancel()

				var recs []*kgo.Record
				for i := range 20 {
					recs = append(recs, &kgo.Record{
						Key:     []byte(fmt.Sprintf("key-%d", i)),
						Value:   []byte(fmt.Sprintf("value %d value %d value %d", i, i, i)),
						Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}},
					})
				}
				if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					t.Fatalf("produce: %v", err)
				}

				records, versions := broker.captured()
				if len(records) == 0 {
					t.Fatal("broker captured no produce records")
				}
				total, sawCodec := 0, false
				for i, r := range records {
					batch, h, err := recordbatch.ValidateProduce(r, versions[i], maxMessageBytes)
					if err != nil {
						t.Fatalf("produce v%d records %d: %v", versions[i], i, err)
					}
					if len(batch) != len(r) || h.HasProducerID() != idempotent {
						t.Fatalf("batch %d: %d of %d bytes, producer id %d", i, len(batch), len(r), h.ProducerID)
					}
					// kgo only compresses when it pays off; tiny batches may go out plain.
					if got := h.Compression(); got != c.want && got != recordbatch.CompressionNone {
						t.Fatalf("batch %d compression %v, want %v", i, got, c.want)
					}
					sawCodec = sawCodec || h.Compression() == c.want
					total += int(h.NumRecords)
				}
				if total != len(recs) || !sawCodec {
					t.Fatalf("captured %d records (produced %d), saw %v: %v", total, len(recs), c.want, sawCodec)
				}
			})
		}
	}
}
