package kafka

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/meta"
	"github.com/strandkafka/strand/internal/replica"
)

// Helpers shared by the topic, config and offset handlers.

// Authorized operations, as bit fields of ACL operation codes. Strand has
// no authorizer yet, and Kafka without one allows every operation a
// resource supports (AclEntry.supportedOperations).
const (
	// authorizedOpsOmitted is the answer when the client did not ask.
	authorizedOpsOmitted int32 = math.MinInt32
	// READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
	// ALTER_CONFIGS.
	topicAuthorizedOps int32 = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11
	// CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
	// ALTER_CONFIGS, IDEMPOTENT_WRITE.
	clusterAuthorizedOps int32 = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12
)

const (
	// maxCommandsPerProposal bounds the commands of one ProposeBatch made
	// for one request, so a request naming thousands of topics becomes
	// several log entries instead of one oversized one.
	maxCommandsPerProposal = 64
	// maxPartitionsPerTopic mirrors meta's bound, so a validate-only
	// request gets the answer a real one would.
	maxPartitionsPerTopic = 1 << 16
)

// errShortResults: the database returned fewer results than commands, a
// bug on its side; the affected topics get UNKNOWN_SERVER_ERROR.
var errShortResults = errors.New("kafka: metadata database returned too few results")

// topicNameError explains why name is invalid.
func topicNameError(name string) string {
	switch {
	case name == "":
		return "topic name is empty"
	case len(name) > meta.MaxTopicNameBytes:
		return fmt.Sprintf("topic name is %d bytes, at most %d", len(name), meta.MaxTopicNameBytes)
	case name == "." || name == "..":
		return fmt.Sprintf("topic name cannot be %q", name)
	}
	return fmt.Sprintf("topic name %q has characters other than ASCII letters, digits, '.', '_' and '-'", name)
}

// collisionName folds the characters that collide in metric names, as
// Kafka does: topics "a.b" and "a_b" cannot both exist.
func collisionName(name string) string { return strings.ReplaceAll(name, ".", "_") }

// outcome is what proposing one command came to: a result, or an error
// when no result is known.
type outcome struct {
	res meta.Result
	err error
}

// code returns the Kafka error of o, nil for success, with a message.
func (o outcome) code() (*kerr.Error, string) {
	if o.err != nil {
		return proposeErrCode(o.err), o.err.Error()
	}
	if o.res.Code != 0 {
		e, ok := kerr.ErrorForCode(o.res.Code).(*kerr.Error)
		if !ok {
			e = kerr.UnknownServerError
		}
		return e, o.res.Message
	}
	return nil, ""
}

// proposeAll proposes cmds in entries of at most maxCommandsPerProposal
// commands and returns one outcome per command. A chunk too large for one
// entry is split until it fits or is a single command.
func proposeAll(ctx context.Context, m MetaDB, cmds []meta.Command) []outcome {
	out := make([]outcome, len(cmds))
	for start := 0; start < len(cmds); start += maxCommandsPerProposal {
		end := min(start+maxCommandsPerProposal, len(cmds))
		proposeChunk(ctx, m, cmds[start:end], out[start:end])
	}
	return out
}

func proposeChunk(ctx context.Context, m MetaDB, cmds []meta.Command, out []outcome) {
	res, err := m.ProposeBatch(ctx, cmds)
	if errors.Is(err, replica.ErrTooLarge) && len(cmds) > 1 {
		half := len(cmds) / 2
		proposeChunk(ctx, m, cmds[:half], out[:half])
		proposeChunk(ctx, m, cmds[half:], out[half:])
		return
	}
	for i := range out {
		switch {
		case err != nil:
			out[i].err = err
		case i < len(res):
			out[i].res = res[i]
		default:
			out[i].err = errShortResults
		}
	}
}

// proposeErrCode maps a proposal that has no result to the Kafka error a
// client can act on. Retriable codes are for outcomes a retry can fix;
// after REQUEST_TIMED_OUT the command may still apply, exactly as a
// timed-out request to a Kafka controller may.
func proposeErrCode(err error) *kerr.Error {
	switch {
	case errors.Is(err, replica.ErrTooLarge):
		return kerr.InvalidRequest
	case errors.Is(err, replica.ErrClosed):
		// This agent is stopping: NOT_CONTROLLER sends the client to
		// another one.
		return kerr.NotController
	case errors.Is(err, replica.ErrAmbiguous), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut
	}
	return kerr.UnknownServerError
}

// withTimeoutMillis bounds ctx by a request's TimeoutMillis when positive.
func withTimeoutMillis(ctx context.Context, ms int32) (context.Context, context.CancelFunc) {
	if ms <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
}

// strPtr returns a pointer to s, or nil when s is empty: the wire's
// nullable error message.
func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// partitionLeaderEpoch is every partition's leader epoch, as Metadata
// reports it: there are no leader elections, so it never moves.
const partitionLeaderEpoch = 0

// checkCurrentLeaderEpoch fences a request's CurrentLeaderEpoch as Kafka's
// Partition.localLogWithEpochOrThrow does: -1 skips the check, an older
// epoch is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH.
func checkCurrentLeaderEpoch(epoch int32) *kerr.Error {
	switch {
	case epoch == -1 || epoch == partitionLeaderEpoch:
		return nil
	case epoch < partitionLeaderEpoch:
		return kerr.FencedLeaderEpoch
	}
	return kerr.UnknownLeaderEpoch
}

// topicCache looks topics up by name once per request.
type topicCache struct {
	view *meta.View
	m    map[string]cachedTopic
}

type cachedTopic struct {
	t   meta.Topic
	ok  bool
	err error
}

func (c *topicCache) get(name string) (meta.Topic, bool, error) {
	if ct, hit := c.m[name]; hit {
		return ct.t, ct.ok, ct.err
	}
	t, ok, err := c.view.Topic(name)
	if c.m == nil {
		c.m = make(map[string]cachedTopic)
	}
	c.m[name] = cachedTopic{t, ok, err}
	return t, ok, err
}

// partition returns the state of one partition of topic name, or the
// error to answer for it.
func (c *topicCache) partition(name string, p int32) (meta.Topic, meta.PartitionState, *kerr.Error) {
	t, ok, err := c.get(name)
	switch {
	case err != nil:
		return t, meta.PartitionState{}, kerr.UnknownServerError
	case !ok || p < 0 || p >= t.Partitions:
		return t, meta.PartitionState{}, kerr.UnknownTopicOrPartition
	}
	ps, ok, err := c.view.Partition(t.ID, p)
	switch {
	case err != nil:
		return t, ps, kerr.UnknownServerError
	case !ok:
		return t, ps, kerr.UnknownTopicOrPartition
	}
	return t, ps, nil
}
