package kafka

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/quota"
)

// quotaEntity builds a kadm entity from "user=alice", "client-id=" (a
// trailing "=" is <default>).
func quotaEntity(parts ...string) kadm.ClientQuotaEntity {
	var e kadm.ClientQuotaEntity
	for _, p := range parts {
		typ, name, _ := strings.Cut(p, "=")
		c := kadm.ClientQuotaEntityComponent{Type: typ}
		if name != "" {
			c.Name = &name
		}
		e = append(e, c)
	}
	return e
}

func setQuota(key string, v float64) kadm.AlterClientQuotaOp {
	return kadm.AlterClientQuotaOp{Key: key, Value: v}
}

// describeQuotas renders what kadm describes, one line per entity, in
// the agent's order.
func describeQuotas(t *testing.T, a *testAgent, strict bool, comps ...kadm.DescribeClientQuotaComponent) []string {
	t.Helper()
	got, err := a.Admin.DescribeClientQuotas(a.ctx(t), strict, comps)
	if err != nil {
		t.Fatalf("DescribeClientQuotas: %v", err)
	}
	var lines []string
	for _, q := range got {
		var vs []string
		for _, v := range q.Values {
			vs = append(vs, fmt.Sprintf("%s=%g", v.Key, v.Value))
		}
		e := strings.TrimSuffix(strings.TrimPrefix(q.Entity.String(), "{"), "}")
		lines = append(lines, e+": "+strings.Join(vs, " "))
	}
	return lines
}

func alterQuotas(t *testing.T, a *testAgent, validate bool, entries ...kadm.AlterClientQuotaEntry) kadm.AlteredClientQuotas {
	t.Helper()
	alter := a.Admin.AlterClientQuotas
	if validate {
		alter = a.Admin.ValidateAlterClientQuotas
	}
	res, err := alter(a.ctx(t), entries)
	if err != nil {
		t.Fatalf("AlterClientQuotas: %v", err)
	}
	return res
}

// TestClientQuotasRoundTrip: quotas set with kadm are described back,
// filtered as Kafka filters them, changed incrementally and removed;
// validate-only changes nothing.
func TestClientQuotasRoundTrip(t *testing.T) {
	a := newTestAgent(t)
	raiseMetadataLevel(t, a, meta.MetadataLevel4)
	res := alterQuotas(t, a, false,
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("user=alice"), Ops: []kadm.AlterClientQuotaOp{
			setQuota(quota.KeyProducerByteRate, 1024), setQuota(quota.KeyRequestPercentage, 12.5)}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("user=alice", "client-id="), Ops: []kadm.AlterClientQuotaOp{
			setQuota(quota.KeyConsumerByteRate, 2048)}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("client-id=app"), Ops: []kadm.AlterClientQuotaOp{
			setQuota(quota.KeyProducerByteRate, 300)}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("client-id="), Ops: []kadm.AlterClientQuotaOp{
			setQuota(quota.KeyProducerByteRate, 100)}},
	)
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("%v: %v %s", r.Entity, r.Err, r.ErrMessage)
		}
	}
	all := []string{
		"client-id=<default>: producer_byte_rate=100",
		"client-id=app: producer_byte_rate=300",
		"user=alice: producer_byte_rate=1024 request_percentage=12.5",
		"user=alice, client-id=<default>: consumer_byte_rate=2048",
	}
	exact := func(typ, name string) kadm.DescribeClientQuotaComponent {
		return kadm.DescribeClientQuotaComponent{Type: typ, MatchName: &name, MatchType: kmsg.QuotasMatchTypeExact}
	}
	def := func(typ string) kadm.DescribeClientQuotaComponent {
		return kadm.DescribeClientQuotaComponent{Type: typ, MatchType: kmsg.QuotasMatchTypeDefault}
	}
	anyOf := func(typ string) kadm.DescribeClientQuotaComponent {
		return kadm.DescribeClientQuotaComponent{Type: typ, MatchType: kmsg.QuotasMatchTypeAny}
	}
	for _, tc := range []struct {
		name   string
		strict bool
		comps  []kadm.DescribeClientQuotaComponent
		want   []string
	}{
		{name: "all", want: all},
		{name: "user alice", comps: []kadm.DescribeClientQuotaComponent{exact("user", "alice")}, want: all[2:]},
		{name: "user alice strict", strict: true, comps: []kadm.DescribeClientQuotaComponent{exact("user", "alice")}, want: all[2:3]},
		{name: "default client", comps: []kadm.DescribeClientQuotaComponent{def("client-id")}, want: []string{all[0], all[3]}},
		{name: "default client strict", strict: true, comps: []kadm.DescribeClientQuotaComponent{def("client-id")}, want: all[:1]},
		{name: "any client strict", strict: true, comps: []kadm.DescribeClientQuotaComponent{anyOf("client-id")}, want: all[:2]},
		{name: "user and client", comps: []kadm.DescribeClientQuotaComponent{anyOf("user"), anyOf("client-id")}, want: all[3:]},
		{name: "no such user", comps: []kadm.DescribeClientQuotaComponent{exact("user", "bob")}},
		{name: "ip", comps: []kadm.DescribeClientQuotaComponent{anyOf("ip")}},
	} {
		if got := describeQuotas(t, a, tc.strict, tc.comps...); !slices.Equal(got, tc.want) {
			t.Errorf("%s: described\n%s\nwant\n%s", tc.name, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}

	// Validate-only changes nothing; a removal and a set change only
	// their keys; removing the last key removes the entity.
	alterQuotas(t, a, true, kadm.AlterClientQuotaEntry{Entity: quotaEntity("client-id=app"), Ops: []kadm.AlterClientQuotaOp{{Key: quota.KeyProducerByteRate, Remove: true}}})
	if got := describeQuotas(t, a, false); !slices.Equal(got, all) {
		t.Fatalf("validate-only changed the quotas:\n%s", strings.Join(got, "\n"))
	}
	alterQuotas(t, a, false,
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("client-id=app"), Ops: []kadm.AlterClientQuotaOp{{Key: quota.KeyProducerByteRate, Remove: true}}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("user=alice"), Ops: []kadm.AlterClientQuotaOp{
			{Key: quota.KeyRequestPercentage, Remove: true}, setQuota(quota.KeyProducerByteRate, 4096)}},
	)
	want := []string{all[0], "user=alice: producer_byte_rate=4096", all[3]}
	if got := describeQuotas(t, a, false); !slices.Equal(got, want) {
		t.Fatalf("after alter:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAlterClientQuotasRefused: Kafka's validation, entry by entry, with
// its codes; the valid entries of the request still apply.
func TestAlterClientQuotasRefused(t *testing.T) {
	a := newTestAgent(t)
	// Below metadata level 4 the log cannot hold quotas.
	res := alterQuotas(t, a, false, kadm.AlterClientQuotaEntry{Entity: quotaEntity("user=u"), Ops: []kadm.AlterClientQuotaOp{setQuota(quota.KeyProducerByteRate, 1)}})
	if !errors.Is(res[0].Err, kerr.UnsupportedVersion) {
		t.Fatalf("below level 4: %v %s, want UNSUPPORTED_VERSION", res[0].Err, res[0].ErrMessage)
	}
	raiseMetadataLevel(t, a, meta.MetadataLevel4)
	entry := func(e kadm.ClientQuotaEntity, ops ...kadm.AlterClientQuotaOp) kadm.AlterClientQuotaEntry {
		return kadm.AlterClientQuotaEntry{Entity: e, Ops: ops}
	}
	tests := []struct {
		entry kadm.AlterClientQuotaEntry
		msg   string // "" for success
	}{
		{entry(quotaEntity("user=ok"), setQuota(quota.KeyProducerByteRate, 10)), ""},
		{entry(nil, setQuota(quota.KeyProducerByteRate, 10)), "Invalid empty client quota entity"},
		{entry(quotaEntity("user=a", "user=b"), setQuota(quota.KeyProducerByteRate, 10)), "duplicate entity entry user"},
		{entry(quotaEntity("group=g"), setQuota(quota.KeyProducerByteRate, 10)), "Unhandled client quota entity type: group"},
		{entry(quotaEntity("ip=127.0.0.1"), setQuota("connection_creation_rate", 10)), "not supported"},
		{entry(kadm.ClientQuotaEntity{{Type: "user", Name: new(string)}}, setQuota(quota.KeyProducerByteRate, 10)), "Empty user not supported"},
		{entry(quotaEntity("user=x"), setQuota("bogus", 1)), "Invalid configuration key bogus"},
		{entry(quotaEntity("user=x"), setQuota(quota.KeyControllerMutationRate, 1)), "Invalid configuration key controller_mutation_rate"},
		{entry(quotaEntity("user=x"), setQuota(quota.KeyProducerByteRate, 0)), "must be greater than 0"},
		{entry(quotaEntity("user=x"), setQuota(quota.KeyConsumerByteRate, 1.5)), "cannot be a fractional value"},
		{entry(quotaEntity("user=x"), setQuota(quota.KeyProducerByteRate, 1), setQuota(quota.KeyProducerByteRate, 2)), "Duplicate quota key"},
		{entry(quotaEntity("user=ok"), setQuota(quota.KeyConsumerByteRate, 10)), "Ignoring duplicate entity"},
		{entry(quotaEntity("client-id=ok2"), setQuota(quota.KeyRequestPercentage, 0.5)), ""},
	}
	var entries []kadm.AlterClientQuotaEntry
	for _, tc := range tests {
		entries = append(entries, tc.entry)
	}
	res = alterQuotas(t, a, false, entries...)
	if len(res) != len(tests) {
		t.Fatalf("%d results for %d entries", len(res), len(tests))
	}
	for i, tc := range tests {
		r := res[i]
		switch {
		case tc.msg == "" && r.Err != nil:
			t.Errorf("entry %d (%v): %v %s", i, r.Entity, r.Err, r.ErrMessage)
		case tc.msg != "" && (!errors.Is(r.Err, kerr.InvalidRequest) || !strings.Contains(r.ErrMessage, tc.msg)):
			t.Errorf("entry %d (%v): %v %q, want INVALID_REQUEST %q", i, r.Entity, r.Err, r.ErrMessage, tc.msg)
		}
	}
	want := []string{"client-id=ok2: request_percentage=0.5", "user=ok: producer_byte_rate=10"}
	if got := describeQuotas(t, a, false); !slices.Equal(got, want) {
		t.Fatalf("stored:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Describe's filter errors are top-level.
	for _, tc := range []struct {
		comps []kadm.DescribeClientQuotaComponent
		want  *kerr.Error
	}{
		{[]kadm.DescribeClientQuotaComponent{{Type: "", MatchType: kmsg.QuotasMatchTypeAny}}, kerr.InvalidRequest},
		{[]kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: kmsg.QuotasMatchTypeAny}, {Type: "user", MatchType: kmsg.QuotasMatchTypeDefault}}, kerr.InvalidRequest},
		{[]kadm.DescribeClientQuotaComponent{{Type: "group", MatchType: kmsg.QuotasMatchTypeAny}}, kerr.UnsupportedVersion},
		{[]kadm.DescribeClientQuotaComponent{{Type: "ip", MatchType: kmsg.QuotasMatchTypeAny}, {Type: "user", MatchType: kmsg.QuotasMatchTypeAny}}, kerr.InvalidRequest},
		{[]kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: kmsg.QuotasMatchTypeExact}}, kerr.InvalidRequest},
		{[]kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: kmsg.QuotasMatchTypeDefault, MatchName: new(string)}}, kerr.InvalidRequest},
		{[]kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: kmsg.QuotasMatchTypeAny, MatchName: new(string)}}, kerr.InvalidRequest},
		{[]kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 7}}, kerr.InvalidRequest},
	} {
		_, err := a.Admin.DescribeClientQuotas(a.ctx(t), false, tc.comps)
		if !errors.Is(err, tc.want) {
			t.Errorf("describe %+v: %v, want %v", tc.comps, err, tc.want)
		}
	}
}

// TestQuotaPrecedenceThroughAdmin: quotas set with kadm at each of
// Kafka's eight levels bound alice's client app in Kafka's order: each
// applies until it is removed, then the next.
func TestQuotaPrecedenceThroughAdmin(t *testing.T) {
	a := newTestAgent(t)
	raiseMetadataLevel(t, a, meta.MetadataLevel4)
	levels := []kadm.ClientQuotaEntity{
		quotaEntity("user=alice", "client-id=app"),
		quotaEntity("user=alice", "client-id="),
		quotaEntity("user=alice"),
		quotaEntity("user=", "client-id=app"),
		quotaEntity("user=", "client-id="),
		quotaEntity("user="),
		quotaEntity("client-id=app"),
		quotaEntity("client-id="),
	}
	var entries []kadm.AlterClientQuotaEntry
	for i, e := range levels {
		entries = append(entries, kadm.AlterClientQuotaEntry{Entity: e, Ops: []kadm.AlterClientQuotaOp{setQuota(quota.KeyProducerByteRate, float64(1000+i))}})
	}
	// Distractors for other users and clients.
	entries = append(entries,
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("user=bob"), Ops: []kadm.AlterClientQuotaOp{setQuota(quota.KeyProducerByteRate, 1)}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("user=alice", "client-id=other"), Ops: []kadm.AlterClientQuotaOp{setQuota(quota.KeyProducerByteRate, 2)}})
	for _, r := range alterQuotas(t, a, false, entries...) {
		if r.Err != nil {
			t.Fatalf("%v: %v", r.Entity, r.Err)
		}
	}
	q := a.Deps.shared.quotas
	for i, e := range levels {
		bound, _, ok := q.set().Resolve(quota.Produce, quota.Client{User: "alice", ClientID: "app"})
		if !ok || bound != float64(1000+i) {
			t.Fatalf("with levels %d.. set, alice/app is bound by %v (ok %v), want %d (%v)", i, bound, ok, 1000+i, e)
		}
		alterQuotas(t, a, false, kadm.AlterClientQuotaEntry{Entity: e, Ops: []kadm.AlterClientQuotaOp{{Key: quota.KeyProducerByteRate, Remove: true}}})
	}
	if bound, _, ok := q.set().Resolve(quota.Produce, quota.Client{User: "alice", ClientID: "app"}); ok {
		t.Fatalf("every level removed, alice/app still bound by %v", bound)
	}
}
