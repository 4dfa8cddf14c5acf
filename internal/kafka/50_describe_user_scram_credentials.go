// DescribeUserScramCredentials: v0
//   - KIP-554: each user's mechanisms and iteration counts from the
//     local copy, never a salt or key. No users (null or empty) lists
//     every user with a credential, sorted by name.
//   - Per user, as Kafka answers: DUPLICATE_RESOURCE for a user named
//     twice, RESOURCE_NOT_FOUND for one without credentials.
//   - ACLs: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED
//     for the whole request, as Kafka.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(50, 0, 0, handleDescribeUserScramCredentials) }

func handleDescribeUserScramCredentials(_ context.Context, r *Request) (kmsg.Response, error) {
	req := r.Body.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	if code := r.authz().clusterCode(kmsg.ACLOperationDescribe); code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	view := db.View()
	defer view.Close()

	if len(req.Users) == 0 {
		all, err := view.ScramCredentials("")
		if err != nil {
			resp.ErrorCode = kerr.UnknownServerError.Code
			return resp, nil
		}
		for i := 0; i < len(all); {
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.User = all[i].User
			for ; i < len(all) && all[i].User == res.User; i++ {
				res.CredentialInfos = append(res.CredentialInfos, credentialInfo(all[i]))
			}
			resp.Results = append(resp.Results, res)
		}
		return resp, nil
	}

	named := make(map[string]int, len(req.Users))
	for _, u := range req.Users {
		named[u.Name]++
	}
	for _, u := range req.Users {
		n, ok := named[u.Name]
		if !ok {
			continue // answered at its first mention
		}
		delete(named, u.Name)
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = u.Name
		var cs []meta.ScramCredential
		if n == 1 {
			cs, err = view.ScramCredentials(u.Name)
		}
		switch {
		case n > 1:
			res.ErrorCode = kerr.DuplicateResource.Code
			res.ErrorMessage = strPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + u.Name)
		case err != nil:
			res.ErrorCode = kerr.UnknownServerError.Code
		case len(cs) == 0:
			res.ErrorCode = kerr.ResourceNotFound.Code
			res.ErrorMessage = strPtr("Attempt to describe a user credential that does not exist: " + u.Name)
		}
		for _, c := range cs {
			res.CredentialInfos = append(res.CredentialInfos, credentialInfo(c))
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

func credentialInfo(c meta.ScramCredential) kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo {
	ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
	ci.Mechanism = int8(c.Mechanism)
	ci.Iterations = c.Iterations
	return ci
}
