package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// maxProduceHeaders bounds the header lines of the produce form; the
// form body itself is bounded by maxFormBytes.
const maxProduceHeaders = 64

// handleProduce produces one record from the topic page's form: a key
// (or none), a value, headers as key=value lines, and a partition or -1
// for the key's hash (kgo's default partitioner, as any client). It is a
// form like the others: same origin, Config.Authorize, bounded body.
func (c *Console) handleProduce(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	partition, err := formInt(r, "partition", -1, -1, 1<<16)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	rec := &kgo.Record{Topic: topic, Value: []byte(r.PostFormValue("value"))}
	if k := r.PostFormValue("key"); k != "" || r.PostFormValue("empty_key") == "on" {
		rec.Key = []byte(k) // no key field: a null key, as kcat without -K
	}
	headers, err := parseHeaderLines(r.PostFormValue("headers"))
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	rec.Headers = headers
	opts := append(c.cfg.Kafka[:len(c.cfg.Kafka):len(c.cfg.Kafka)], kgo.ClientID("strand-console"))
	if partition >= 0 {
		rec.Partition = int32(partition)
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	// A producer of its own: the page's partition choice is per record,
	// and the shared client is a reader. Forms are rare; a client per
	// record costs a connection, not a leak: it is closed here.
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		c.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(r.Context(), kafkaTimeout)
	defer cancel()
	res := cl.ProduceSync(ctx, rec)
	if err := res.FirstErr(); err != nil {
		c.fail(w, r, http.StatusBadGateway, fmt.Errorf("producing to %s: %w", topic, err))
		return
	}
	got := res[0].Record
	done(w, r, Prefix+"topics/"+url.PathEscape(topic),
		fmt.Sprintf("record produced to partition %d at offset %d", got.Partition, got.Offset))
}

// parseHeaderLines reads "key=value" lines into record headers, in
// order; a key may repeat, as Kafka allows.
func parseHeaderLines(s string) ([]kgo.RecordHeader, error) {
	var hs []kgo.RecordHeader
	for line := range strings.Lines(s) {
		line = strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("header line %q: want key=value", line)
		}
		if len(hs) == maxProduceHeaders {
			return nil, errors.New("at most 64 headers")
		}
		hs = append(hs, kgo.RecordHeader{Key: strings.TrimSpace(k), Value: []byte(v)})
	}
	return hs, nil
}
