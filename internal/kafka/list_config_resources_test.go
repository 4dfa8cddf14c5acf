package kafka

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestListConfigResources(t *testing.T) {
	a := newTestAgent(t, withGroups(t, nil, nil))
	a.createTopic(t, "t2", 1, nil)
	a.createTopic(t, "t1", 1, nil)
	if codes := commitCodes(a.rawRequest(t, commitReq(8, "g", "", -1, "t1", map[int32]int64{0: 1})).(*kmsg.OffsetCommitResponse)); codes[0] != 0 {
		t.Fatalf("commit: %v", codes)
	}
	list := func(version int16, types ...int8) string {
		req := kmsg.NewPtrListConfigResourcesRequest()
		req.Version, req.ResourceTypes = version, types
		resp := a.rawRequest(t, req).(*kmsg.ListConfigResourcesResponse)
		if resp.ErrorCode != 0 {
			return kerr.ErrorForCode(resp.ErrorCode).(*kerr.Error).Message
		}
		var out []string
		for _, r := range resp.ConfigResources {
			out = append(out, fmt.Sprintf("%d:%s", r.Type, r.Name))
		}
		return strings.Join(out, " ")
	}
	node := fmt.Sprint(testNodeID)
	for _, tc := range []struct {
		version int16
		types   []int8
		want    string
	}{
		{0, nil, ""}, // client metrics: none
		{1, nil, "2:t1 2:t2 4:" + node + " 8:" + node + " 32:g"},
		{1, []int8{32, 2}, "2:t1 2:t2 32:g"},
		{1, []int8{16}, ""},
		{1, []int8{3}, "UNSUPPORTED_VERSION"}, // DELEGATION_TOKEN... not a config resource
	} {
		if got := list(tc.version, tc.types...); got != tc.want {
			t.Errorf("v%d %v: %q, want %q", tc.version, tc.types, got, tc.want)
		}
	}
}
