package catalog_test

import (
	"context"
	"slices"
	"testing"

	"github.com/strandkafka/strand/internal/acl"
	"github.com/strandkafka/strand/internal/auth"
	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/meta/metatest"
	"github.com/strandkafka/strand/internal/sql/catalog"
	"github.com/strandkafka/strand/internal/sql/engine"
	"github.com/strandkafka/strand/internal/sql/pgwire"
)

type noClient struct{}

func (noClient) ParameterStatus(string, string) {}
func (noClient) Notice(string, string, string)  {}

// TestNewSessionAs: a session made for another principal (the
// console's caller) is authorized as that principal, not as a SQL user
// of the name given.
func TestNewSessionAs(t *testing.T) {
	db := metatest.New(nil)
	db.MustPropose(t, meta.FinalizeFeatures{Bootstrap: true, Features: []meta.FeatureLevel{{Name: meta.FeatureMetadata, Level: meta.MetadataLevel7}}})
	db.MustPropose(t, meta.CreateTopic{Name: "orders", Partitions: 1})
	var asked []auth.Principal
	cat, err := catalog.New(catalog.Config{Store: leveled{db}, Next: engine.New(nil, ""),
		Authorize: func(r acl.Request, _ acl.Operation, _ acl.ResourceType, _ string) (bool, error) {
			asked = append(asked, r.Principal)
			return false, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p := auth.Principal{Type: "Strand", Name: "admin-token"}
	sess, err := cat.NewSessionAs(ctx, pgwire.SessionInfo{User: "admin-token", Database: "strand", Client: noClient{}}, p)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	stmts, err := sess.Prepare(ctx, "CREATE SOURCE s (v text) WITH (topic = 'orders', format = 'text')", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stmts[0].Start(ctx, nil); pgwire.ErrorOf(err).Code != pgwire.CodeInsufficientPrivilege {
		t.Fatalf("CREATE refused by the authorizer: %v, want 42501", err)
	}
	if len(asked) == 0 || slices.ContainsFunc(asked, func(q auth.Principal) bool { return q != p }) {
		t.Errorf("authorizer asked about %v, want only %v", asked, p)
	}
}
