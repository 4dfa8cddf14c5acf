package meta

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/acl"
)

// TestACLLimits: a command of more than MaxACLsPerCommand bindings is
// refused whole, and a binding past MaxACLs alone; a binding already
// held still succeeds at the limit, and a delete makes room again.
func TestACLLimits(t *testing.T) {
	r := openReplica(t, newTestLog(), nil, "w")
	mustOK(t, r, FinalizeFeatures{Features: []FeatureLevel{{Name: FeatureMetadata, Level: MetadataLevel4}}})
	binding := func(i int) acl.Binding {
		return acl.Binding{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: fmt.Sprintf("t%d", i),
			PatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:a", Host: "*",
			Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow}
	}
	batch := func(from, n int) CreateACLs {
		c := CreateACLs{ACLs: make([]acl.Binding, n)}
		for i := range c.ACLs {
			c.ACLs[i] = binding(from + i)
		}
		return c
	}
	if res := mustPropose(t, r, batch(0, MaxACLsPerCommand+1)); res.Code != kerr.InvalidRequest.Code {
		t.Fatalf("%d ACLs in one command: %v", MaxACLsPerCommand+1, res.Err())
	}
	for from := 0; from < MaxACLs; from += MaxACLsPerCommand {
		res := mustPropose(t, r, batch(from, MaxACLsPerCommand))
		for i, code := range res.Codes {
			if code != 0 {
				t.Fatalf("ACL %d below the limit: %v", from+i, kerr.ErrorForCode(code))
			}
		}
	}
	res := mustPropose(t, r, CreateACLs{ACLs: []acl.Binding{binding(0), binding(MaxACLs)}})
	if len(res.Codes) != 2 || res.Codes[0] != 0 || res.Codes[1] != kerr.InvalidRequest.Code {
		t.Fatalf("at the limit, a held ACL and a new one: %v", res.Codes)
	}
	name := "t0"
	del := mustPropose(t, r, DeleteACLs{Filters: []acl.Filter{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: &name,
		PatternType: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}}})
	if len(del.DeletedACLs) != 1 || len(del.DeletedACLs[0]) != 1 {
		t.Fatalf("delete: %+v", del)
	}
	if res := mustPropose(t, r, CreateACLs{ACLs: []acl.Binding{binding(MaxACLs)}}); res.Codes[0] != 0 {
		t.Fatalf("after a delete: %v", kerr.ErrorForCode(res.Codes[0]))
	}
	v := viewOf(t, r)
	all, err := v.ACLs()
	if err != nil || len(all) != MaxACLs {
		t.Fatalf("ACLs held: %d, %v; want %d", len(all), err, MaxACLs)
	}
}
