package kafka

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestFirstErrorCode(t *testing.T) {
	produce := func(codes ...int16) *kmsg.ProduceResponse {
		r := kmsg.NewPtrProduceResponse()
		topic := kmsg.NewProduceResponseTopic()
		for i, c := range codes {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition = int32(i)
			p.ErrorCode = c
			topic.Partitions = append(topic.Partitions, p)
		}
		r.Topics = append(r.Topics, topic)
		return r
	}
	top := kmsg.NewPtrFindCoordinatorResponse()
	top.ErrorCode = kerr.CoordinatorNotAvailable.Code
	fetch := kmsg.NewPtrFetchResponse()
	fetch.Topics = []kmsg.FetchResponseTopic{{Partitions: []kmsg.FetchResponseTopicPartition{{RecordBatches: []byte{1, 2, 3}}, {ErrorCode: kerr.OffsetOutOfRange.Code}}}}
	for _, tc := range []struct {
		resp kmsg.Response
		want int16
	}{
		{nil, 0},
		{produce(), 0},
		{produce(0, 0), 0},
		{produce(0, kerr.CorruptMessage.Code, kerr.MessageTooLarge.Code), kerr.CorruptMessage.Code},
		{top, kerr.CoordinatorNotAvailable.Code},
		{fetch, kerr.OffsetOutOfRange.Code},
	} {
		t.Run(fmt.Sprintf("%T/%d", tc.resp, tc.want), func(t *testing.T) {
			var in any
			if tc.resp != nil {
				in = tc.resp
			}
			if got := firstErrorCode(in); got != tc.want {
				t.Fatalf("firstErrorCode = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestCloseReason(t *testing.T) {
	if got := CloseReason(fmt.Errorf("read: %w", ErrIdleTimeout)); got != "idle_timeout" {
		t.Fatalf("CloseReason(idle) = %q", got)
	}
	for err, want := range map[error]string{
		ErrTooManyConnsPerIP: "too_many_conns_per_ip",
		ErrTooManyConns:      "too_many_conns",
		ErrFrameTimeout:      "frame_timeout",
	} {
		if got := CloseReason(fmt.Errorf("x: %w", err)); got != want {
			t.Errorf("CloseReason(%v) = %q, want %q", err, got, want)
		}
	}
	if got := CloseReason(fmt.Errorf("boom")); got != "io" {
		t.Fatalf("CloseReason(other) = %q", got)
	}
}
