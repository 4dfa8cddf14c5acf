// AlterUserScramCredentials: v0
//   - KIP-554: deletions and upsertions of SCRAM credentials, one
//     meta.AlterScramCredential per change, all in one log entry. An
//     upsertion carries the salted password; it is turned into the
//     stored and server keys here, so neither it nor the password
//     reaches the log.
//   - One result per user, the first error among its changes, with
//     Kafka's codes: UNACCEPTABLE_CREDENTIAL for an empty user name,
//     iterations outside 4096-16384 or an empty salt or salted password;
//     UNSUPPORTED_SASL_MECHANISM for an unknown mechanism;
//     DUPLICATE_RESOURCE for a user and mechanism changed twice;
//     RESOURCE_NOT_FOUND for deleting a credential that does not exist.
//     A user with a change refused before proposing has none of its
//     changes made; apply's refusals (RESOURCE_NOT_FOUND) refuse only
//     that change.
//   - Needs strand.metadata.version 4: below it every user is answered
//     UNSUPPORTED_VERSION, as Kafka answers below the metadata.version
//     that holds SCRAM records.
//   - ACLs: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for
//     every user and nothing changed, as Kafka.

package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(51, 0, 0, handleAlterUserScramCredentials) }

// userAlter is one user's part of the request.
type userAlter struct {
	name string
	err  *kerr.Error
	msg  string
	cmds []meta.Command
}

func handleAlterUserScramCredentials(ctx context.Context, r *Request) (kmsg.Response, error) {
	req := r.Body.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}

	var users []*userAlter
	byName := map[string]*userAlter{}
	seen := map[string]bool{} // user NUL mechanism
	user := func(name string, m int8) *userAlter {
		u := byName[name]
		if u == nil {
			u = &userAlter{name: name}
			byName[name] = u
			users = append(users, u)
		}
		fail := func(e *kerr.Error, msg string) {
			if u.err == nil {
				u.err, u.msg = e, msg
			}
		}
		key := fmt.Sprintf("%s\x00%d", name, m)
		switch {
		case name == "":
			fail(kerr.UnacceptableCredential, "Username must not be empty")
		case meta.ScramMechanism(m).KeyBytes() == 0 || m < 0:
			fail(kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
		case seen[key]:
			fail(kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")
		}
		seen[key] = true
		return u
	}
	for _, d := range req.Deletions {
		u := user(d.Name, d.Mechanism)
		u.cmds = append(u.cmds, meta.AlterScramCredential{User: d.Name, Mechanism: meta.ScramMechanism(d.Mechanism), Delete: true})
	}
	for _, up := range req.Upsertions {
		u := user(up.Name, up.Mechanism)
		switch {
		case u.err != nil:
		case up.Iterations < meta.MinScramIterations:
			u.err, u.msg = kerr.UnacceptableCredential, fmt.Sprintf("Too few iterations: %d < %d", up.Iterations, meta.MinScramIterations)
		case up.Iterations > meta.MaxScramIterations:
			u.err, u.msg = kerr.UnacceptableCredential, fmt.Sprintf("Too many iterations: %d > %d", up.Iterations, meta.MaxScramIterations)
		case len(up.Salt) == 0 || len(up.SaltedPassword) == 0:
			u.err, u.msg = kerr.UnacceptableCredential, "Salt and salted password must not be empty"
		default:
			m := meta.ScramMechanism(up.Mechanism)
			stored, server := scramKeys(m, up.SaltedPassword)
			u.cmds = append(u.cmds, meta.AlterScramCredential{User: up.Name, Mechanism: m,
				Iterations: up.Iterations, Salt: append([]byte(nil), up.Salt...), StoredKey: stored, ServerKey: server})
		}
	}

	if r.authz().clusterCode(kmsg.ACLOperationAlter) != 0 {
		// As Kafka: every user of the request gets the error, nothing
		// is changed.
		for _, u := range users {
			u.err, u.msg, u.cmds = kerr.ClusterAuthorizationFailed, "Cluster authorization failed.", nil
		}
	}
	var cmds []meta.Command
	for _, u := range users {
		if u.err == nil {
			cmds = append(cmds, u.cmds...)
		}
	}
	outs := proposeAll(ctx, db, cmds)
	for _, u := range users {
		if u.err == nil {
			for _, o := range outs[:len(u.cmds)] {
				e, msg := o.code()
				if errors.Is(o.err, meta.ErrNotAtLevel) {
					e, msg = kerr.UnsupportedVersion, "SCRAM credentials need strand.metadata.version 4"
				}
				if e != nil && u.err == nil {
					u.err, u.msg = e, msg
				}
			}
			outs = outs[len(u.cmds):]
		}
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = u.name
		if u.err != nil {
			res.ErrorCode = u.err.Code
			res.ErrorMessage = strPtr(u.msg)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}
