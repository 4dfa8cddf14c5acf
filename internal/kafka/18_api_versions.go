// ApiVersions: v0-4
//   - The answer is the registry: every served key with its version range,
//     sorted by key.
//   - Above v4: answered at v0 with UNSUPPORTED_VERSION and only key 18's
//     range, without parsing the request, as the Java broker does (KIP-511);
//     the client retries at that version. The server's dispatch does this
//     (with apiVersionsUnsupported), since the handler never sees such a
//     request.
//   - v3+: ClientSoftwareName and ClientSoftwareVersion must match Kafka's
//     pattern, else INVALID_REQUEST with no keys, as Kafka does; valid ones
//     are kept on the Conn.
//   - Left out: v5 (KIP-1242: the client names the cluster and node it
//     expects), until agents have a cluster id and node ids.
//   - v3+ features: transaction.version, supported 0-2 and finalized at
//     Deps.TransactionVersion (2 unless configured). Level 2 tells
//     clients to use KIP-890 part 2 (Produce v12 without
//     AddPartitionsToTxn, TxnOffsetCommit v5, an epoch bump per EndTxn
//     v5). Strand's features never change while it runs, so the
//     finalized epoch is constant.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(18, 0, 4, handleAPIVersions) }

func handleAPIVersions(_ context.Context, r *Request) (kmsg.Response, error) {
	req := r.Body.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 {
		if !validSoftwareField(req.ClientSoftwareName) || !validSoftwareField(req.ClientSoftwareVersion) {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp, nil
		}
		r.Conn.setClientSoftware(req.ClientSoftwareName, req.ClientSoftwareVersion)
	}
	// Shared and read-only: encoding does not modify it.
	resp.ApiKeys = r.Conn.srv.apiKeys
	if req.Version >= 3 {
		tv := r.Deps.transactionVersion()
		resp.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{{Name: featureTransactionVersion, MinVersion: 0, MaxVersion: maxTransactionVersion}}
		resp.FinalizedFeaturesEpoch = finalizedFeaturesEpoch
		resp.FinalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{{Name: featureTransactionVersion, MinVersionLevel: tv, MaxVersionLevel: tv}}
	}
	return resp, nil
}

// Feature levels (KIP-584).
const (
	featureTransactionVersion = "transaction.version"
	maxTransactionVersion     = 2
	// finalizedFeaturesEpoch is any non-negative number that stays the
	// same: -1 would tell clients there are no finalized features.
	finalizedFeaturesEpoch = 1
)

// apiVersionsUnsupported is the answer to an ApiVersions version above e's
// range.
func apiVersionsUnsupported(e regEntry) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	k := kmsg.NewApiVersionsResponseApiKey()
	k.ApiKey = apiVersionsKey
	k.MinVersion = e.minVersion
	k.MaxVersion = e.maxVersion
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{k}
	return resp
}

// validSoftwareField matches Kafka's [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
func validSoftwareField(s string) bool {
	if s == "" {
		return false
	}
	alnum := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	if !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}
