package txn

import (
	"cmp"
	"context"
	"regexp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandkafka/strand/internal/meta"
)

// TopicPartitions names some partitions of a topic.
type TopicPartitions struct {
	Topic      string
	Partitions []int32
}

// PartitionProducers answers one partition of DescribeProducers.
type PartitionProducers struct {
	Code      int16
	Producers []meta.ProducerInfo
}

// DescribeProducers lists, per requested partition (in request order),
// the producers with state in it, after a Sync with the log. State
// unwritten for meta.ProducerIDExpirationMs of log clock is left out:
// apply treats it as forgotten, though it deletes it only when it next
// touches it. Any agent answers for any partition: there are no leaders.
// An unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION; a failed
// Sync NOT_LEADER_OR_FOLLOWER (this agent is stopping) or
// REQUEST_TIMED_OUT, both retriable.
func (c *Coordinator) DescribeProducers(ctx context.Context, topics []TopicPartitions) [][]PartitionProducers {
	view, now, e := c.syncedView(ctx, kerr.NotLeaderForPartition)
	if view != nil {
		defer view.Close()
	}
	out := make([][]PartitionProducers, len(topics))
	for i, rt := range topics {
		out[i] = make([]PartitionProducers, len(rt.Partitions))
		var t meta.Topic
		te := e
		if te == nil {
			t, te = topicOf(view, rt.Topic)
		}
		for j, p := range rt.Partitions {
			pe := te
			if pe == nil {
				out[i][j].Producers, pe = activeProducers(view, t, p, now)
			}
			if pe != nil {
				out[i][j].Code = pe.Code
			}
		}
	}
	return out
}

// topicOf looks a topic up by name.
func topicOf(view *meta.View, name string) (meta.Topic, *kerr.Error) {
	t, ok, err := view.Topic(name)
	switch {
	case err != nil:
		return t, kerr.UnknownServerError
	case !ok:
		return t, kerr.UnknownTopicOrPartition
	}
	return t, nil
}

// activeProducers lists a partition's unexpired producers as of log
// clock now.
func activeProducers(view *meta.View, t meta.Topic, p int32, now int64) ([]meta.ProducerInfo, *kerr.Error) {
	if p < 0 || p >= t.Partitions {
		return nil, kerr.UnknownTopicOrPartition
	}
	switch _, ok, err := view.Partition(t.ID, p); {
	case err != nil:
		return nil, kerr.UnknownServerError
	case !ok:
		return nil, kerr.UnknownTopicOrPartition
	}
	infos, err := view.Producers(t.ID, p)
	if err != nil {
		return nil, kerr.UnknownServerError
	}
	var out []meta.ProducerInfo
	for _, pi := range infos {
		if now-pi.LastTimestamp < meta.ProducerIDExpirationMs {
			out = append(out, pi)
		}
	}
	return out, nil
}

// DescribedTxn answers one id of DescribeTransactions.
type DescribedTxn struct {
	Code          int16
	State         string
	ProducerID    int64
	ProducerEpoch int16
	TimeoutMs     int32
	// StartMs is the log clock when the ongoing transaction began, -1
	// when none is ongoing.
	StartMs int64
	// Topics are the ongoing transaction's partitions, topics sorted by
	// name.
	Topics []TopicPartitions
}

// DescribeTransactions answers, per transactional id (in request order),
// its state from the replicated database after a Sync with the log, so
// any agent answers for any id (never NOT_COORDINATOR). States are
// Kafka's names (meta.TxnStatus); Strand never shows PrepareCommit,
// PrepareAbort or PrepareEpochFence: EndTxn and the abort of a fenced or
// timed-out transaction each complete in one apply. A topic deleted
// since the transaction added it is left out. An unknown id is
// TRANSACTIONAL_ID_NOT_FOUND; a failed Sync COORDINATOR_NOT_AVAILABLE
// (this agent is stopping) or REQUEST_TIMED_OUT, both retriable.
func (c *Coordinator) DescribeTransactions(ctx context.Context, ids []string) []DescribedTxn {
	if len(ids) == 0 {
		return nil
	}
	out := make([]DescribedTxn, len(ids))
	view, _, syncErr := c.syncedView(ctx, kerr.CoordinatorNotAvailable)
	if view != nil {
		defer view.Close()
	}
	names := make(map[meta.TopicID]string)
	for i, id := range ids {
		e := syncErr
		if e == nil {
			e = describeTxn(view, id, &out[i], names)
		}
		if e != nil {
			out[i].Code = e.Code
		}
	}
	return out
}

// describeTxn fills d with id's state. names caches topic names by id
// over the request.
func describeTxn(view *meta.View, id string, d *DescribedTxn, names map[meta.TopicID]string) *kerr.Error {
	s, ok, err := view.Txn(id)
	switch {
	case err != nil:
		return kerr.UnknownServerError
	case !ok:
		return kerr.TransactionalIDNotFound
	}
	d.State = s.Status.String()
	d.ProducerID, d.ProducerEpoch = s.ProducerID, s.ProducerEpoch
	d.TimeoutMs = s.TimeoutMs
	d.StartMs = -1
	if s.Status != meta.TxnOngoing {
		return nil
	}
	d.StartMs = s.StartMs
	// s.Partitions is sorted by topic id, so each topic's partitions are
	// consecutive.
	for i := 0; i < len(s.Partitions); {
		tid := s.Partitions[i].TopicID
		j := i
		var parts []int32
		for ; j < len(s.Partitions) && s.Partitions[j].TopicID == tid; j++ {
			parts = append(parts, s.Partitions[j].Partition)
		}
		i = j
		name, seen := names[tid]
		if !seen {
			t, ok, err := view.TopicByID(tid)
			if err != nil {
				return kerr.UnknownServerError
			}
			if ok {
				name = t.Name
			}
			names[tid] = name
		}
		if name == "" {
			continue
		}
		d.Topics = append(d.Topics, TopicPartitions{Topic: name, Partitions: parts})
	}
	slices.SortFunc(d.Topics, func(x, y TopicPartitions) int { return cmp.Compare(x.Topic, y.Topic) })
	return nil
}

// kafkaStates are the transaction state names Kafka knows.
var kafkaStates = []string{
	"Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
	"CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence",
}

// ListRequest filters ListTransactions; empty filters match everything.
type ListRequest struct {
	// States are Kafka state names.
	States []string
	// ProducerIDs are producer ids.
	ProducerIDs []int64
	// MinDurationMs >= 0 keeps only transactions ongoing for longer than
	// that by the log clock; -1 keeps all.
	MinDurationMs int64
	// Pattern is an RE2 expression the whole id must match (KIP-1152).
	Pattern string
}

// ListResult answers a ListRequest.
type ListResult struct {
	// Code is the request's error code.
	Code int16
	// UnknownStates are the States Kafka does not know, which match
	// nothing.
	UnknownStates []string
	Txns          []ListedTxn
}

// ListedTxn is one transactional id of a ListResult.
type ListedTxn struct {
	TransactionalID string
	ProducerID      int64
	State           string
}

// ListTransactions lists the transactional ids in the replicated
// database, after a Sync with the log, that this agent coordinates, so a
// client that asks every agent, as kadm and kafka-transactions.sh do,
// sees each id once; while agents disagree on who is live, an id may be
// listed by two agents or by none. A state name Kafka knows that Strand
// never enters (PrepareCommit, PrepareAbort, PrepareEpochFence, Dead)
// matches nothing. MinDurationMs compares with the start of the ongoing
// transaction (Kafka compares its wall clock with the start of the last
// transaction in any state; only an ongoing one is running here). A
// pattern that does not compile is INVALID_REGULAR_EXPRESSION; a failed
// Sync COORDINATOR_NOT_AVAILABLE (this agent is stopping) or
// REQUEST_TIMED_OUT, both retriable.
func (c *Coordinator) ListTransactions(ctx context.Context, req ListRequest) ListResult {
	var out ListResult
	var states map[string]bool
	for _, f := range req.States {
		if !slices.Contains(kafkaStates, f) {
			out.UnknownStates = append(out.UnknownStates, f)
			continue
		}
		if states == nil {
			states = make(map[string]bool)
		}
		states[f] = true
	}
	var pids map[int64]bool
	if len(req.ProducerIDs) > 0 {
		pids = make(map[int64]bool, len(req.ProducerIDs))
		for _, p := range req.ProducerIDs {
			pids[p] = true
		}
	}
	var pattern *regexp.Regexp
	if req.Pattern != "" {
		// Go's regexp is RE2, as the field asks; it rejects expressions
		// whose program would be too large, so compiling one is bounded.
		var err error
		if pattern, err = regexp.Compile(`^(?:` + req.Pattern + `)$`); err != nil {
			out.Code = kerr.InvalidRegularExpression.Code
			return out
		}
	}

	view, now, e := c.syncedView(ctx, kerr.CoordinatorNotAvailable)
	if e != nil {
		out.Code = e.Code
		return out
	}
	defer view.Close()
	all, err := view.Txns()
	if err != nil {
		out.Code = kerr.UnknownServerError.Code
		return out
	}
	for _, s := range all {
		switch {
		case !c.owns(s.TransactionalID):
		case len(req.States) > 0 && !states[s.Status.String()]:
		case pids != nil && !pids[s.ProducerID]:
		case req.MinDurationMs >= 0 && (s.Status != meta.TxnOngoing || now-s.StartMs <= req.MinDurationMs):
		case pattern != nil && !pattern.MatchString(s.TransactionalID):
		default:
			out.Txns = append(out.Txns, ListedTxn{TransactionalID: s.TransactionalID, ProducerID: s.ProducerID, State: s.Status.String()})
		}
	}
	return out
}
