// DescribeLogDirs: v0-4
//   - Every agent reports one logical log dir, LogDirName: record data
//     lives in the shared object store, not in per-broker directories.
//     In it, the partitions Metadata names this agent the leader of
//     (placement, or a reassignment's replica list: replicas.go), so that
//     kadm's DescribeAllLogDirs, which
//     asks every broker, lists each partition once and sums to what the
//     cluster stores.
//   - Size is the partition's stored bytes as apply counts them (meta
//     PartitionStorage): its index entries' byte ranges in data objects,
//     compression included. On a log below strand.metadata.version 3,
//     which keeps no numbers, every size is 0. OffsetLag is 0 and
//     IsFuture false: there are no replicas to move.
//   - A second dir, DeadLogDirName, holds the bytes of the same
//     partitions that the store still keeps in dead objects: dropped
//     from the index (retention, DeleteRecords, compaction), waiting for
//     the delete delay and the janitor (package gc). Kafka's tools sum
//     every dir, which is what the store holds; Strand's CLI shows the
//     two apart (SIZE and DEAD). Its ErrorCode is KAFKA_STORAGE_ERROR
//     when the footers of the dead objects could not be read.
//   - A null topic list describes every topic; a named topic or partition
//     that does not exist, or that another agent leads, is left out, as a
//     Kafka broker leaves out what it does not host.
//   - v3+: top-level ErrorCode 0. v4+: TotalBytes and UsableBytes -1, as
//     Kafka reports a volume it cannot measure: an object store has no
//     fixed capacity.
//   - Left out: v5 (KIP-1066 cordoned log dirs).
//   - ACLs (authz.go): Describe on the cluster, else no directories and
//     (v3+) CLUSTER_AUTHORIZATION_FAILED.

package kafka

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandkafka/strand/internal/meta"
)

func init() { regKey(35, 0, 4, handleDescribeLogDirs) }

// LogDirName is the one logical log dir every agent reports.
const LogDirName = "strand-objects"

// DeadLogDirName is the logical log dir of the bytes held by dead
// objects, which the store keeps until the janitor deletes them.
const DeadLogDirName = "strand-objects-dead"

// unknownBytes is TotalBytes and UsableBytes: not measurable.
const unknownBytes = -1

func handleDescribeLogDirs(ctx context.Context, r *Request) (kmsg.Response, error) {
	db, err := r.Deps.meta()
	if err != nil {
		return nil, err
	}
	req := r.Body.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if resp.ErrorCode = r.authz().clusterCode(kmsg.ACLOperationDescribe); resp.ErrorCode != 0 {
		// Kafka answers no directories (and, from v3, the code).
		return resp, nil
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = LogDirName
	dir.TotalBytes, dir.UsableBytes = unknownBytes, unknownBytes

	view := db.View()
	defer view.Close()
	brokers := r.Deps.brokers(r.Conn)
	var topics []meta.Topic
	asked := map[string][]int32{}
	if req.Topics == nil {
		if topics, err = view.Topics(); err != nil {
			return nil, err
		}
	} else {
		for _, rt := range req.Topics {
			if _, dup := asked[rt.Topic]; dup {
				asked[rt.Topic] = append(asked[rt.Topic], rt.Partitions...)
				continue
			}
			t, ok, err := view.Topic(rt.Topic)
			if err != nil {
				return nil, err
			}
			if ok {
				topics = append(topics, t)
			}
			asked[rt.Topic] = slices.Clone(rt.Partitions)
		}
	}
	lists := replicaLists{view: view}
	var dead map[meta.TopicID]map[int32]int64
	deadDir := kmsg.NewDescribeLogDirsResponseDir()
	deadDir.Dir = DeadLogDirName
	deadDir.TotalBytes, deadDir.UsableBytes = unknownBytes, unknownBytes
	if r.Deps.DeadBytes != nil {
		if dead, err = r.Deps.DeadBytes(ctx, view); err != nil {
			deadDir.ErrorCode = kerr.KafkaStorageError.Code
		}
	}
	for _, t := range topics {
		sizes, err := view.TopicStorage(t.ID)
		if err != nil {
			return nil, err
		}
		recorded, err := lists.of(t.ID)
		if err != nil {
			return nil, err
		}
		dt := kmsg.NewDescribeLogDirsResponseDirTopic()
		dt.Topic = t.Name
		for p := range t.Partitions {
			if want, named := asked[t.Name]; (named && !slices.Contains(want, p)) || r.Deps.replicasOf(brokers, t.ID, p, recorded[p]).leader != r.Deps.Cluster.NodeID {
				continue
			}
			dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			dp.Partition, dp.Size = p, sizes[p].Bytes
			dt.Partitions = append(dt.Partitions, dp)
			if n := dead[t.ID][p]; n > 0 {
				dd := dp
				dd.Size = n
				ddt := deadTopic(&deadDir, t.Name)
				ddt.Partitions = append(ddt.Partitions, dd)
			}
		}
		if len(dt.Partitions) > 0 {
			dir.Topics = append(dir.Topics, dt)
		}
	}
	resp.Dirs = append(resp.Dirs, dir)
	if r.Deps.DeadBytes != nil {
		resp.Dirs = append(resp.Dirs, deadDir)
	}
	return resp, nil
}

// deadTopic returns dir's entry for topic, adding it if it is not the
// last one (topics are added in order, each once).
func deadTopic(dir *kmsg.DescribeLogDirsResponseDir, topic string) *kmsg.DescribeLogDirsResponseDirTopic {
	if n := len(dir.Topics); n > 0 && dir.Topics[n-1].Topic == topic {
		return &dir.Topics[n-1]
	}
	dt := kmsg.NewDescribeLogDirsResponseDirTopic()
	dt.Topic = topic
	dir.Topics = append(dir.Topics, dt)
	return &dir.Topics[len(dir.Topics)-1]
}
