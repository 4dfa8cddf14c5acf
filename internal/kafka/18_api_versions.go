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
//   - v3+ features (KIP-584): SupportedFeatures are this build's ranges
//     (meta.SupportedFeatures: group.version 0-1,
//     strand.metadata.version 1-2, transaction.version 0-2); below v4 the
//     ones starting at 0 are left out, as Kafka does (KAFKA-17492: older
//     clients fail to read a minimum of 0). FinalizedFeatures are the
//     levels the shared log finalized (features.go; UpdateFeatures
//     changes them), level 0 left out as Kafka does, and the epoch is
//     the log position after the last change. A log of builds before
//     feature levels finalized none: transaction.version is then
//     Deps.TransactionVersion (--transaction-version, 2 unless
//     configured), group.version 1 and strand.metadata.version 1, at
//     epoch 1, as those builds answered. transaction.version 2 tells
//     clients to use KIP-890 part 2 (Produce v12 without
//     AddPartitionsToTxn, TxnOffsetCommit v5, an epoch bump per EndTxn
//     v5); group.version 1 that ConsumerGroupHeartbeat is served.

package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
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
		for _, f := range meta.SupportedFeatures() {
			if req.Version < 4 && f.Min == 0 {
				continue
			}
			resp.SupportedFeatures = append(resp.SupportedFeatures,
				kmsg.ApiVersionsResponseSupportedFeature{Name: f.Name, MinVersion: f.Min, MaxVersion: f.Max})
		}
		f, err := r.Deps.features()
		if err != nil {
			// The copy cannot be read; the levels are unknown, which
			// epoch -1 says.
			resp.FinalizedFeaturesEpoch = -1
			return resp, nil
		}
		resp.FinalizedFeaturesEpoch = f.epoch
		for _, l := range f.levels {
			if l.Level != 0 {
				resp.FinalizedFeatures = append(resp.FinalizedFeatures,
					kmsg.ApiVersionsResponseFinalizedFeature{Name: l.Name, MinVersionLevel: l.Level, MaxVersionLevel: l.Level})
			}
		}
	}
	return resp, nil
}

// maxTransactionVersion is the highest transaction.version this build
// supports (meta.SupportedFeatures).
const maxTransactionVersion = 2

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
