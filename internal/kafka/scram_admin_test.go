package kafka

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func upsertion(user string, mech int8, iterations int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations = user, mech, iterations
	u.Salt = []byte("salt")
	u.SaltedPassword = bytes.Repeat([]byte{7}, 32)
	return u
}

func deletion(user string, mech int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
	d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	d.Name, d.Mechanism = user, mech
	return d
}

// TestAlterUserScramCredentialsCodes: one result per user, with Kafka's
// code for each refusal, and a refused user changes nothing.
func TestAlterUserScramCredentialsCodes(t *testing.T) {
	a := newSASLAgent(t)
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{
		deletion("ghost", 1), // no such credential
		deletion("twice", 1), // and upserted below: duplicate
		deletion("alice", 1), // fine
		deletion("mech", 3),  // unknown mechanism
		deletion("", 2),      // empty name
	}
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		upsertion("twice", 1, 4096),
		upsertion("few", 1, 4095),
		upsertion("many", 2, 16385),
		upsertion("bob", 2, 4096),
		upsertion("alice", 2, 5000),
	}
	salted := upsertion("nosalt", 1, 4096)
	salted.Salt = nil
	req.Upsertions = append(req.Upsertions, salted)
	resp := a.request(t, req).(*kmsg.AlterUserSCRAMCredentialsResponse)
	want := map[string]int16{
		"ghost": kerr.ResourceNotFound.Code, "twice": kerr.DuplicateResource.Code, "alice": 0,
		"mech": kerr.UnsupportedSaslMechanism.Code, "": kerr.UnacceptableCredential.Code,
		"few": kerr.UnacceptableCredential.Code, "many": kerr.UnacceptableCredential.Code,
		"bob": 0, "nosalt": kerr.UnacceptableCredential.Code,
	}
	if len(resp.Results) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(resp.Results), len(want), resp.Results)
	}
	for _, r := range resp.Results {
		if w, ok := want[r.User]; !ok || r.ErrorCode != w {
			t.Errorf("user %q: code %d (%v), want %d", r.User, r.ErrorCode, r.ErrorMessage, w)
		}
	}

	described, err := a.Admin.DescribeUserSCRAMs(a.ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]kadm.CredInfo{}
	for u, d := range described {
		if d.Err != nil {
			t.Fatalf("describe %s: %v", u, d.Err)
		}
		got[u] = d.CredInfos
	}
	// alice lost SCRAM-SHA-256 and has SCRAM-SHA-512 at 5000; bob is
	// new; twice was refused whole.
	if len(got) != 2 || len(got["alice"]) != 1 || got["alice"][0].Mechanism != kadm.ScramSha512 ||
		got["alice"][0].Iterations != 5000 || len(got["bob"]) != 1 {
		t.Fatalf("described %+v", got)
	}
}

// TestDescribeUserScramCredentialsCodes: a user named twice is
// DUPLICATE_RESOURCE, an unknown one RESOURCE_NOT_FOUND, and a user
// whose name prefixes another's sees only its own credentials.
func TestDescribeUserScramCredentialsCodes(t *testing.T) {
	a := newSASLAgent(t)
	a.createUser(t, "al", "pw-of-al")
	req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range []string{"al", "nobody", "alice", "alice"} {
		ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		ru.Name = u
		req.Users = append(req.Users, ru)
	}
	resp := a.request(t, req).(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if len(resp.Results) != 3 {
		t.Fatalf("%d results, want 3: %+v", len(resp.Results), resp.Results)
	}
	for _, r := range resp.Results {
		switch r.User {
		case "al":
			if r.ErrorCode != 0 || len(r.CredentialInfos) != 2 || r.CredentialInfos[0].Iterations != 4096 || r.CredentialInfos[1].Iterations != 8192 {
				t.Errorf("al: %+v", r)
			}
		case "nobody":
			if r.ErrorCode != kerr.ResourceNotFound.Code {
				t.Errorf("nobody: code %d", r.ErrorCode)
			}
		case "alice":
			if r.ErrorCode != kerr.DuplicateResource.Code {
				t.Errorf("alice named twice: code %d", r.ErrorCode)
			}
		default:
			t.Errorf("unasked user %q", r.User)
		}
	}
}

// TestAlterUserScramCredentialsBelowLevel4: before
// strand.metadata.version 4 the log cannot hold credentials, which
// Kafka answers UNSUPPORTED_VERSION.
func TestAlterUserScramCredentialsBelowLevel4(t *testing.T) {
	a := newTestAgent(t)
	res, err := a.Admin.AlterUserSCRAMs(a.ctx(t), nil, []kadm.UpsertSCRAM{{User: "u", Mechanism: kadm.ScramSha256, Password: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res["u"]; !errors.Is(r.Err, kerr.UnsupportedVersion) {
		t.Fatalf("below level 4: %+v", r)
	}
}

// TestAuthThrottle: each failure from an address within a minute of
// its last doubles the delay, up to the bound; a success or a quiet
// minute starts it over; addresses do not share it.
func TestAuthThrottle(t *testing.T) {
	th := newAuthThrottle(100 * time.Millisecond)
	a := netip.MustParseAddr("10.0.0.1")
	now := time.Unix(1_700_000_000, 0)
	var got []time.Duration
	for range 8 {
		got = append(got, th.failed(a, now))
		now = now.Add(time.Second)
	}
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("delays %v, want %v ms", got, want)
		}
	}
	if d := th.failed(netip.MustParseAddr("10.0.0.2"), now); d != 100*time.Millisecond {
		t.Fatalf("another address's first failure waits %v", d)
	}
	if d := th.failed(a, now.Add(2*time.Minute)); d != 100*time.Millisecond {
		t.Fatalf("after a quiet window: %v", d)
	}
	th.failed(a, now.Add(2*time.Minute))
	th.succeeded(a)
	if d := th.failed(a, now.Add(2*time.Minute)); d != 100*time.Millisecond {
		t.Fatalf("after a success: %v", d)
	}
	if d := newAuthThrottle(-1).failed(a, now); d != 0 {
		t.Fatalf("disabled throttle waits %v", d)
	}
}
