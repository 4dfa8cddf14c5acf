package agent_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandkafka/strand/internal/agent"
	"github.com/strandkafka/strand/internal/certs/certstest"
)

var update = flag.Bool("update", false, "rewrite docs/metrics.md from the agent's registry")

// referencePath is the metrics reference, from this package's directory.
const referencePath = "../../docs/metrics.md"

// metricSection groups the reference by name prefix; the first section
// whose prefix a metric has takes it.
var metricSections = []struct{ title, prefix, intro string }{
	{"Kafka requests and connections", "strand_kafka_", "Counted by the agent that served the request or held the connection: sum over agents."},
	{"Topics", "strand_topic_", "Kafka's BrokerTopicMetrics, per topic, internal topics included, counted by the agent that served the Produce or Fetch: sum over agents for the cluster's rate."},
	{"Consumer groups", "strand_consumer_group_", "Computed at scrape time from the agent's copy of the metadata, and reported only by the agent that coordinates the group, so a sum over agents counts each group once. At most `--metrics-max-group-partitions` (default 10000) partitions' series per scrape; groups past it are left out whole."},
	{"Produce path", "strand_produce_", "Counted by the agent that took the Produce: sum over agents."},
	{"Produce path", "strand_flush_", ""},
	{"Fetch path", "strand_fetch_", "Counted by the agent that served the Fetch: sum over agents."},
	{"Object store", "strand_objstore_", "Every request the agent made to the object store (produce uploads, fetch reads, garbage collection, compaction, snapshots), as the client saw it."},
	{"Shared log and metadata", "strand_log_", "Each agent appends to the shared log and applies it to its own metadata copy."},
	{"Shared log and metadata", "strand_meta_", ""},
	{"Shared log and metadata", "strand_snapshot_", ""},
	{"Shared log and metadata", "strand_clock_", ""},
	{"Storage: garbage collection", "strand_gc_", "Read from the replicated state at scrape time: every agent reports the same numbers (its copy's), so take the max over agents, not the sum."},
	{"Storage: garbage collection", "strand_data_", ""},
	{"Storage: compaction", "strand_compaction_", "Registered only with compaction on (`--compaction-enable`, or an S3 store); for the partitions each agent owns: sum the byte counters, take the max of the lag."},
	{"Storage: compacted topics (cleaner)", "strand_cleaner_", "Kafka's log cleaner, for topics with cleanup.policy=compact, over the partitions each agent owns."},
	{"Client telemetry (KIP-714)", "strand_client_telemetry_", "Kafka clients that push their metrics (librdkafka and franz-go do by default) get them re-exported by the agent they pushed to, under the client's own metric names with dots made underscores (`org_apache_kafka_producer_node_request_latency_avg`), labelled `client_instance_id`, `client_id` and the point's attributes (`node_id`, ...): see docs/protocol.md. The series below are about that telemetry; sum over agents."},
	{"Schema registry", "strand_schema_registry_", "Registered only while the agent serves the schema registry (`--schema-registry-listen`). Requests are counted by the agent that served them (sum over agents); subjects and schemas are read from each agent's copy at scrape time (take the max)."},
	{"SQL: sources and materialized views", "strand_sql_", "Registered only while the agent serves SQL (`--sql-listen`). Every agent maintains every materialized view from the topics, so each reports its own copy's progress: compare agents, do not sum them. Labelled by source or view name, which the catalog bounds."},
	{"Connectors", "strand_connect_", "Every agent registers them, for the connectors placement gives it: sum over agents for the cluster. The `strand_connect_http_` series only while it serves the Connect REST API (`--connect-listen`), counted by the agent that answered."},
	{"Security", "strand_authorization_", "Every agent counts the refusals of its own listeners and endpoints: sum over agents. Each refusal is also written, rate-limited, by the logger kafka.authorizer.logger (docs/security.md)."},
	{"Security", "strand_tls_", ""},
	{"Share groups", "strand_share_", "Groups and members are reported by the agent that coordinates each group (sum over agents). Acquisitions, acknowledgements and sessions are counted by the agent that served the ShareFetch or ShareAcknowledge (sum over agents); in-flight records are read from each agent's copy of the metadata at scrape time (every agent reports the cluster's: take the max)."},
	{"Process", "strand_", ""},
}

// operatorUse says what an operator does with each metric: the part of
// the reference the registry cannot give. A metric without one fails
// the test, so a new metric is documented when it is added.
var operatorUse = map[string]string{
	"strand_authorization_denials_total":                 "A rise after a deploy or a credentials change is a client with the wrong principal or a missing ACL: the authorization log (kafka.authorizer.logger, INFO) names the principal, host, resource, listener and the rule that refused it.",
	"strand_tls_certificate_expiry_timestamp_seconds":    "Days left: `(... - time()) / 86400`; alert at `... - time() < 14 * 86400`, by listener and file. A rotated file shows at the next scrape; the old subject's series then goes away.",
	"strand_share_records_acquired_total":                "Deliveries per second to share group members (`rate(...)`); above the accept rate by the redeliveries (releases, lock timeouts).",
	"strand_share_records_acknowledged_total":            "Outcomes per second by type: a rising share of release or reject is consumers failing their work; renew is consumers extending locks on slow records.",
	"strand_share_records_archived_total":                "Records given up on (rejected, or at share.delivery.count.limit): alert on any increase if every record must be processed; they are never delivered again.",
	"strand_share_records_released_total":                "Records redelivered early because a member's session closed or its connection dropped: consumers restarting or crashing.",
	"strand_share_lock_timeouts_total":                   "Acquired records whose lock ran out: consumers slower than share.record.lock.duration.ms, or dead without closing; raise the lock or speed the consumers up.",
	"strand_share_fetches_total":                         "ShareFetch requests answered; with acquired_total, the records per fetch.",
	"strand_share_sessions":                              "Share sessions on this agent: about one per share consumer per agent it fetches from; compare with the share session limit (2000 per agent).",
	"strand_share_inflight_records":                      "The share partitions' in-flight windows by state: acquired near records × locks in flight; available piling up is consumers not keeping up; a window near group.share.partition.max.record.locks stops new acquisitions.",
	"strand_connect_http_requests_total":                 "Refusals by code: 401/403 are callers without credentials or CONNECTOR ACLs, 400 bad configs, 503 an agent not ready or a cluster below metadata level 8.",
	"strand_connect_http_request_seconds":                "A create, update, pause or restart waits for its write through the log: its p99 follows the log's append latency.",
	"strand_connect_connectors":                          "Alert on state=\"failed\" above 0 (strand connect list names which, with the trace in describe); summed over agents, the states add up to the connectors defined (briefly off while one moves after an agent dies).",
	"strand_connect_task_restarts_total":                 "A rate that stays up is a task failing and retrying (1 s doubling to 30 s): see its status' trace.",
	"strand_connect_task_failures_total":                 "Any increase is a task that failed; compare with restarts: failures without restarts are tasks that were stopped (paused, moved) while backing off.",
	"strand_connect_pgsource_records_total":              "Change events per second a PostgreSQL source captures, by op (`rate(...)`); r is the initial snapshot's rows.",
	"strand_connect_pgsource_transactions_total":         "Kafka transactions a source committed: with source_transactions_total, how many PostgreSQL transactions each batched.",
	"strand_connect_pgsource_source_transactions_total":  "PostgreSQL transactions captured per second (`rate(...)`); flat while the database commits is a stuck source.",
	"strand_connect_pgsource_snapshot_rows_total":        "The initial snapshot's progress: compare with the tables' row counts; it counts again if a restart redoes the snapshot.",
	"strand_connect_pgsource_wal_lag_bytes":              "Alert when it keeps growing: WAL written that the source has not yet committed to Strand.",
	"strand_connect_pgsource_lag_seconds":                "End-to-end capture delay at the last commit: the issue's lag in seconds; alert above what consumers tolerate.",
	"strand_connect_pgsource_slot_retained_wal_bytes":    "WAL the database keeps for the slot: alert before it fills the database's disk (a source down or stuck holds it all).",
	"strand_connect_pgsource_confirmed_lsn":              "Moves with each commit; flat while the database writes is a stuck source (the slot holds WAL meanwhile).",
	"strand_connect_pgsource_skipped_transactions_total": "Transactions the database sent again after a restart and the source skipped, being committed already: exactly-once at work, not an error.",
	"strand_connect_sink_rows_total":                     "Rows per second a JDBC sink writes, by op (`rate(...)`).",
	"strand_connect_sink_batches_total":                  "Target transactions per second: with rows_total, the batch size (batch.size caps it).",
	"strand_connect_sink_batch_seconds":                  "p99 of a batch's write and commit in the target: a slow target shows here first.",
	"strand_connect_sink_lag_records":                    "Records the sink is behind its topics: alert when it keeps growing.",
	"strand_connect_sink_fenced_total":                   "Batches rolled back because another task of the connector wrote (briefly, while a connector moves); steady increases mean two agents run it.",
	"strand_kafka_requests_total":                        "Request rate per API (`rate(...[5m])`) and error rate: alert on a rising share of `error!=\"NONE\"`; NOT_COORDINATOR or UNKNOWN_TOPIC_OR_PARTITION bursts follow agents joining or leaving.",
	"strand_kafka_request_seconds":                       "p99 latency per API (`histogram_quantile(0.99, sum by (api, le) (rate(..._bucket[5m])))`); Produce latency includes the object store upload and the log append, Fetch latency the long-poll wait.",
	"strand_kafka_connections":                           "Open connections per listener; compare with `--max-connections`; a steady climb is a client leaking connections.",
	"strand_kafka_connections_opened_total":              "Connection rate; a high rate with few open connections is clients reconnecting in a loop (check their logs and `strand_kafka_connections_closed_total` reasons).",
	"strand_kafka_connections_closed_total":              "Why connections end: `too_many_conns` and `too_many_conns_per_ip` are the limits refusing clients; `client` and `idle_timeout` are normal; `frame_size`, `frame_timeout`, `malformed_request` and `tls_handshake` are broken, slow or hostile clients.",
	"strand_kafka_quota_throttled_requests_total":        "Which APIs clients are throttled on; a client hitting its quota all the time needs a bigger quota (`strand quota`) or fewer bytes.",
	"strand_kafka_quota_throttle_seconds_total":          "Throttle time given per second of wall time: how much quotas slow clients down.",
	"strand_topic_bytes_in_total":                        "Produce throughput per topic (`sum by (topic) (rate(...[5m]))`); the hottest topics, and what object storage the cluster will write.",
	"strand_topic_bytes_out_total":                       "Consume throughput per topic; out over in is the topic's fan-out (how many times each byte is read).",
	"strand_topic_records_in_total":                      "Records per second produced per topic; bytes in over records in is the average record batch size per record.",
	"strand_topic_records_out_total":                     "Records per second consumed per topic, transaction markers included.",
	"strand_zone_bytes_total":                            "Cross-zone transfer, what the cloud bills: `sum(rate(...{crossed!=\"no\"}[5m]))` over `sum(rate(strand_topic_bytes_in_total[5m]))` is bytes crossing per byte produced (a few hundredths when clients say their zone); much `unknown` means clients that give no zone (set `--listener-racks`, `client.rack` or a zone in `client.id`), `other` ones naming a zone no agent runs in.",
	"strand_zone_requests_total":                         "Whether clients reach an agent of their zone: misses beyond a trickle mean a zone has no live agent or clients steered elsewhere; unaware ones give no zone.",
	"strand_consumer_group_lag":                          "Consumer lag in records, as Burrow and kafka-lag-exporter report it: alert when `sum by (group) (...)` keeps growing; a lag that only grows on one partition is a stuck consumer.",
	"strand_consumer_group_committed_offset":             "A committed offset that stops moving while the partition's high watermark moves is a consumer that stopped committing.",
	"strand_consumer_group_members":                      "Members per group; 0 with a growing lag means no consumer is running; a count that flaps means rebalances (session timeouts too short, slow polls).",
	"strand_share_groups":                                "Share groups by state: a Stable count that drops to Empty while work is queued means the consumers stopped heartbeating (crashed, or a share.session.timeout.ms too short for them).",
	"strand_share_group_members":                         "Members per share group: more members than partitions is normal for a share group (they share partitions); 0 with records still queued means nobody is consuming.",
	"strand_consumer_group_partitions_omitted":           "Above 0: the bound left groups out; raise `--metrics-max-group-partitions` if the scrape can carry them, or use Burrow.",
	"strand_consumer_offsets_records_written_total":      "Records written to `__consumer_offsets` (the view Burrow and other lag tools read); it follows the commit rate.",
	"strand_consumer_offsets_records_lost_total":         "Above 0: some commits never reached `__consumer_offsets` (`write_failed` after the retries, `queue_full`); OffsetFetch is still right, but lag tools reading the topic may lag until the group commits again or its coordinator restarts.",
	"strand_consumer_offsets_write_failures_total":       "Failed writes of `__consumer_offsets` records, retried; a steady rise means the produce path (object store) is failing.",
	"strand_produce_request_bytes_total":                 "Produce request bytes as received, headers and framing included; compare with `strand_topic_bytes_in_total` for the overhead.",
	"strand_express_puts_total":                          "Writes each zone bucket of the low-latency tier (`--objstore-express`) acknowledged: the rate is each bucket's PUT rate, held to `--max-puts-per-sec`; a zone whose rate falls to zero while the others' rise is failing or slow.",
	"strand_express_put_bytes_total":                     "Bytes written to each zone bucket of the low-latency tier: billed as S3 Express upload per GB (`strand bench --cost`).",
	"strand_express_third_writes_total":                  "Flushes that also went to the third zone because one of their pair was slow (the hedge percentile) or failed: a steady rate means a zone is unwell.",
	"strand_produce_upload_hedges_total":                 "Hedged uploads (`--objstore-hedge-percentile`): many hedges mean a slow object store tail; `won` says the hedge was the faster one.",
	"strand_client_telemetry_subscriptions_total":        "Clients asking what to push; throttled ones asked again too soon (a client restarting in a loop).",
	"strand_client_telemetry_pushes_total":               "result=\"ok\" is pushes taken; unknown_subscription follows a change of --client-telemetry-* flags (clients re-subscribe), too_large a client past the 1 MiB payload, unreadable a client bug.",
	"strand_client_telemetry_dropped_points_total":       "series_cap rising: raise --client-telemetry-max-series or narrow --client-telemetry-metrics; unsupported_type (histograms) is expected.",
	"strand_client_telemetry_evicted_clients_total":      "Rising while clients are alive: the caps are too small for the clients connected, so their series come and go.",
	"strand_client_telemetry_clients":                    "Clients pushing to this agent; compare with the connected applications to see which do not push.",
	"strand_client_telemetry_series":                     "Near --client-telemetry-max-series: clients are being evicted; it is the scrape-size cost of client telemetry.",
	"strand_flush_bytes":                                 "Data object sizes: small objects under load cost PUT requests; raise `--flush-interval` or `--flush-bytes` to batch more.",
	"strand_flush_seconds":                               "Flush latency, upload plus commit: the floor of produce latency with acks=all.",
	"strand_fetch_response_bytes_total":                  "Fetch response bytes sent, framing included.",
	"strand_fetch_cache_bytes":                           "Read cache fill; it stays at its share of `--memory-budget` once warm.",
	"strand_fetch_cache_lookups_total":                   "Read cache hit ratio (`hit` over all): a falling ratio means consumers read from the object store (catch-up reads, or a cache too small for the tail).",
	"strand_fetch_read_ahead_gets_total":                 "GETs made ahead of catching-up consumers; tune with `--fetch-read-ahead-bytes`.",
	"strand_fetch_long_poll_wakeups_total":               "Long-poll wake-ups; many per Fetch means fetches wake for changes they then find too small (raise fetch.min.bytes on clients).",
	"strand_fetch_long_poll_partitions_rechecked_total":  "Partitions re-read per wake-up: the cost of long polls on wide fetches.",
	"strand_fetch_damaged_objects_total":                 "Any increase is data loss or corruption in the object store: run `strand storage verify` to find every damaged object, and check the bucket (versioning, lifecycle rules, other writers).",
	"strand_fetch_damaged_reads_total":                   "Consumer reads failing on damaged objects; nonzero means some consumers get errors now.",
	"strand_objstore_requests_total":                     "Request rate per operation (what the provider bills) and error rate (`result=\"error\"`, which counts not-found answers and put-if-absent losing to an existing object too): alert on a rising put or get error rate.",
	"strand_objstore_request_seconds":                    "Object store latency per operation; a put p99 rising is the first sign of a slow or throttled bucket, and raises produce latency with it.",
	"strand_objstore_bytes_total":                        "Bytes written and read: transfer costs, and the read amplification of fetches that miss the cache.",
	"strand_log_append_seconds":                          "Shared log append latency, part of every produce and metadata change: a slow log (PostgreSQL, etcd, DynamoDB) slows everything.",
	"strand_log_requests_total":                          "What the shared log costs: `sum by (backend, op) (rate(...[5m]))`. On s3 and dynamodb every request is billed. Following the log costs one tail_moved every 15s while no fetch waits (none while the agent's own lease renewals, every 12s there by default, tell it the tail), and a poll every 20ms while one does; each lease renewal (every `--lease`/3, per agent) is one append, which the other agents then read. A steady high tail_moved rate with no consumer waiting means something keeps the log eager.",
	"strand_log_append_errors_total":                     "Any increase means the shared log refused or lost appends; the agent stops being ready while appends fail.",
	"strand_meta_applied_position":                       "Applied position per agent; agents far apart are a lagging agent.",
	"strand_meta_apply_lag_entries":                      "Entries not applied yet (-1: the log could not be reached); a lag that grows means this agent cannot keep up with the log.",
	"strand_clock_skew_seconds":                          "How far this agent's clock is from the log clock the live agents vote; a few ms to a few seconds is normal, a steady drift is a machine losing NTP.",
	"strand_clock_skewed":                                "Alert on 1: this agent's clock is beyond `--max-clock-skew` from the log clock, so it is unready and proposes no retention, GC, transaction timeouts, offset expiry or tombstone removal until its time is fixed.",
	"strand_meta_apply_lag_seconds":                      "How stale this agent's metadata is; a few ms is normal, seconds mean the agent serves old metadata (alert above a few seconds).",
	"strand_snapshot_gc_manifests_deleted_total":         "Snapshot retention at work (`--snapshot-keep`); flat while snapshots are taken means old snapshots pile up.",
	"strand_snapshot_gc_files_deleted_total":             "Snapshot files deleted; see `strand_snapshot_gc_manifests_deleted_total`.",
	"strand_snapshot_gc_bytes_deleted_total":             "Bytes of object storage snapshot GC gave back.",
	"strand_gc_objects":                                  "Live and dead data objects; dead ones wait out the grace period, then the janitor deletes them.",
	"strand_gc_object_bytes":                             "Live and dead bytes; dead bytes are storage still billed after retention, compaction or topic deletion.",
	"strand_data_stored_bytes":                           "Object storage the cluster's data takes (what the bucket bills for record data).",
	"strand_gc_deleted_objects_total":                    "Deletion rate of dead objects.",
	"strand_gc_deleted_bytes_total":                      "Bytes the janitor gave back.",
	"strand_gc_orphans_total":                            "Orphans found: uploads never committed (a produce that failed after its PUT); a steady rate means produce failures.",
	"strand_gc_orphan_bytes_total":                       "Bytes of orphans deleted.",
	"strand_gc_lag_seconds":                              "How late deletion runs; growing means no janitor is running or it cannot keep up (check its object store errors).",
	"strand_gc_grace_seconds":                            "The grace period in force (`strand.gc.grace.ms` in the log, set by the first `--gc-grace`): the orphan horizon's age.",
	"strand_gc_delete_delay_seconds":                     "The delete delay in force (`strand.gc.delete.delay.ms` in the log, set by the first `--gc-delete-delay`), for reading `strand_gc_lag_seconds`: a dead object's bytes stay in the store about this long after retention let it go.",
	"strand_gc_reconcile_lag_seconds":                    "How far the orphan sweep trails; growing means orphans are not being cleaned up.",
	"strand_compaction_read_bytes_total":                 "Compaction read rate; with written bytes, the write amplification compaction adds.",
	"strand_compaction_written_bytes_total":              "Compaction write rate (object store puts).",
	"strand_compaction_swaps_total":                      "Swaps by result; `failed` rising means compaction cannot commit (check the log and object store errors), `lost` now and then is normal.",
	"strand_compaction_lag_seconds":                      "Age of the oldest uncompacted data; above `--compaction-max-lag` for long means compaction falls behind (raise `--compaction-max-bytes-per-sec`).",
	"strand_compaction_pace_bytes_per_second":            "The pace compaction chose; pinned at `--compaction-max-bytes-per-sec` means the cap limits it.",
	"strand_cleaner_read_bytes_total":                    "Bytes compacted topics' cleaning reads.",
	"strand_cleaner_written_bytes_total":                 "Bytes cleaning writes; with read bytes, how much cleaning shrinks the topics.",
	"strand_cleaner_dropped_records_total":               "Records cleaning removed (superseded keys, old tombstones).",
	"strand_cleaner_rounds_total":                        "Cleaning rounds; none while a compacted topic's dirty ratio is high means the cleaner is stuck.",
	"strand_cleaner_swaps_total":                         "Swaps by result; `failed` rising means cleaning cannot commit.",
	"strand_cleaner_max_dirty_ratio":                     "Kafka's max-dirty-percent: stays near min.cleanable.dirty.ratio when cleaning keeps up; growing means it does not.",
	"strand_schema_registry_requests_total":              "Registry traffic per endpoint; 401 and 403 rising are clients with wrong credentials or missing SUBJECT ACLs, 409 schemas refused as incompatible, 5xx the log or the metadata level (below 6 the registry cannot write).",
	"strand_schema_registry_request_seconds":             "Registry latency per endpoint: reads come from the local copy (sub-millisecond), registrations wait for the log; a slow `POST /subjects/{subject}/versions` is a slow log.",
	"strand_schema_registry_subjects":                    "Subjects in use; compare across agents: one behind is an agent whose copy lags.",
	"strand_schema_registry_schemas":                     "Distinct schemas live versions name; a steady climb on one subject is a producer registering a new schema on every deploy.",
	"strand_sql_source_records_total":                    "Records read from each source's topic by the views and ad-hoc scans over it (each reader counts its own).",
	"strand_sql_source_bytes_total":                      "Key and value bytes read per source; ad-hoc scans re-read a topic from its start, so a high rate with few views means heavy exploring.",
	"strand_sql_source_bad_records_total":                "Records that did not decode, by reason: a rise is a producer writing another format or schema than the source declares; with `bad.records = 'dead-letter'` they are in the dead-letter topic to inspect.",
	"strand_sql_source_late_records_total":               "Records behind their partition's watermark: producers out of order by more than `watermark.delay`; windows drop what arrives after they close.",
	"strand_sql_view_epochs_total":                       "Epoch rate per view; flat while its inputs grow is a stuck view (see `strand_sql_view_failures_total`).",
	"strand_sql_view_input_changes_total":                "Input changes per second a view processes: its throughput.",
	"strand_sql_view_failures_total":                     "Any increase: the view failed and restarts from its checkpoint (the agent's log and SHOW MATERIALIZED VIEWS' status say why).",
	"strand_sql_view_last_epoch_timestamp_seconds":       "`time() - ...` is how long since the view last changed; with a lag above 0 it is how long it has been stuck.",
	"strand_sql_view_input_offsets":                      "Records consumed over the view's input partitions: `rate(...)` is its records/s.",
	"strand_sql_view_input_lag_records":                  "Records the view is behind its topics (read_committed ends): alert when it keeps growing; a short burst after a restart or a new view is catching up.",
	"strand_sql_view_input_lag_seconds":                  "How stale the view's answers are, in time: alert above what its readers tolerate (the freshness a SELECT on it gets).",
	"strand_sql_view_state_bytes":                        "Local disk a view's state takes on each agent; sum over views for the SQL disk footprint, and watch for a view whose state grows without bound (an unbounded GROUP BY or join key).",
	"strand_sql_view_output_changes_total":               "Updates per second to a view's contents (`rate(...)`); what a sink or SUBSCRIBE over it carries.",
	"strand_sql_view_late_records_total":                 "Late input records the view saw, attributed to the view (the source counts the same per source).",
	"strand_sql_view_late_dropped_total":                 "Changes the view's windows dropped as too late: results missing them; raise the source's `watermark.delay` if they matter.",
	"strand_sql_view_bad_records_total":                  "Input records the view's readers could not decode (per view; per reason in `strand_sql_source_bad_records_total`).",
	"strand_sql_view_watermark_timestamp_seconds":        "Why a window has not closed yet: `time() - ...` far above the source's `watermark.delay` means a partition without new records holds the view's watermark back (the least over partitions).",
	"strand_sql_sink_records_total":                      "Records a sink wrote (`rate(...)`): what its consumers receive; flat while its view changes is a stuck sink.",
	"strand_sql_sink_transactions_total":                 "Epochs a sink committed, one Kafka transaction each: with the records, how large its transactions are.",
	"strand_sql_sink_failures_total":                     "Any increase: the sink failed and starts again from its committed progress (the agent's log and SHOW SINKS' status say why).",
	"strand_sql_sink_last_commit_timestamp_seconds":      "`time() - ...` is how long since the sink last wrote; with an input lag above 0, how long it has been stuck.",
	"strand_sql_sink_input_lag_records":                  "Records the sink's committed progress is behind its inputs: alert when it keeps growing.",
	"strand_sql_sink_owned":                              "Which agent runs each sink: summed over agents it should be 1 per sink (briefly 2 or 0 while ownership moves after an agent dies).",
	"strand_sql_sink_restored_ahead_total":               "Any increase is a bug to report: a restored snapshot of a sink's state was ahead of its committed progress (it is discarded and the state rebuilt, so nothing is written twice).",
	"strand_sql_view_snapshots_total":                    "Snapshots of a view's state uploaded by its owning agent: flat for longer than `--sql-view-snapshot-interval` while the view changes means a new agent would replay more of the inputs.",
	"strand_sql_view_snapshot_uploaded_bytes_total":      "Bytes the snapshots uploaded (new files only): the object store's PUT bytes for views.",
	"strand_sql_view_snapshot_bytes":                     "Size of a view's newest snapshot: what a restore downloads.",
	"strand_sql_view_snapshot_duration_seconds":          "How long the newest snapshot took to upload.",
	"strand_sql_view_restores_total":                     "Restores of a view's state on an agent without it, by result: `failed` means a rebuild from the inputs' beginning followed (the log says why); `none`, no snapshot existed.",
	"strand_sql_view_restore_duration_seconds":           "How long the last restore (or the look for a snapshot) took on this agent.",
	"strand_process_resident_memory_peak_bytes":          "Peak memory; near the container limit means raise the limit or lower `--memory-budget`.",
	"strand_build_info":                                  "Which build each agent runs (`count by (version, revision) (strand_build_info)`), for rolling upgrades.",
}

// referenceMetric is one metric family as the reference shows it.
type referenceMetric struct {
	name, kind, help string
	labels           []string
}

// registryMetrics returns the agent's strand_ families, from a scrape
// after traffic. Every family the registry describes must have samples
// in it, or the reference would miss it (initialize its label values).
func registryMetrics(t *testing.T, a *agent.Agent) []referenceMetric {
	t.Helper()
	ch := make(chan *prometheus.Desc, 1024)
	go func() {
		a.MetricsRegistry().Describe(ch)
		close(ch)
	}()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	described := map[string]bool{}
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil && strings.HasPrefix(m[1], "strand_") {
			described[m[1]] = true
		}
	}
	fams, err := a.MetricsRegistry().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var out []referenceMetric
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "strand_") {
			continue
		}
		delete(described, f.GetName())
		var labels []string
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if !slices.Contains(labels, lp.GetName()) {
					labels = append(labels, lp.GetName())
				}
			}
		}
		slices.Sort(labels)
		out = append(out, referenceMetric{name: f.GetName(), kind: strings.ToLower(f.GetType().String()), help: f.GetHelp(), labels: labels})
	}
	for name := range described {
		t.Errorf("%s is registered but had no samples after the reference traffic: initialize its label values so the reference lists it", name)
	}
	return out
}

// renderReference writes the reference for ms.
func renderReference(ms []referenceMetric) string {
	var b strings.Builder
	b.WriteString(`# Metrics reference

<!-- Generated from the agent's registry by
     go test ./internal/agent -run TestMetricsReference -update
     Do not edit: change a metric's help text in the code, or its "Use" in
     internal/agent/metrics_reference_test.go, and regenerate. -->

Every agent serves its metrics in the Prometheus text format at
` + "`GET /metrics`" + ` on its HTTP address (` + "`--http-listen`" + `, default
127.0.0.1:9644), without authentication. Scrape every agent: each reports
what it did itself, except where a section says otherwise. Besides the
` + "`strand_`" + ` metrics below, the Go runtime's ` + "`go_*`" + ` and the process's
` + "`process_*`" + ` metrics (client_golang's collectors) are served.

The Go runtime's profiles are at ` + "`/debug/pprof/`" + ` on the same address
(` + "`go tool pprof http://127.0.0.1:9644/debug/pprof/heap`" + `), behind the admin
authentication: the bearer token of ` + "`--admin-token-file`" + ` or a client
certificate, and on a loopback address only when neither is configured.
`)
	section := func(name string) int {
		for i, s := range metricSections {
			if strings.HasPrefix(name, s.prefix) {
				return i
			}
		}
		return len(metricSections) - 1
	}
	// Sections in order, metrics by name within one; sections that share
	// a title are one.
	slices.SortStableFunc(ms, func(x, y referenceMetric) int {
		if sx, sy := metricSections[section(x.name)].title, metricSections[section(y.name)].title; sx != sy {
			return firstSection(sx) - firstSection(sy)
		}
		return strings.Compare(x.name, y.name)
	})
	title := ""
	for _, m := range ms {
		if s := metricSections[section(m.name)]; s.title != title {
			title = s.title
			fmt.Fprintf(&b, "\n## %s\n", title)
			for _, s2 := range metricSections {
				if s2.title == title && s2.intro != "" {
					fmt.Fprintf(&b, "\n%s\n", s2.intro)
				}
			}
		}
		labels := "none"
		if len(m.labels) > 0 {
			labels = "`" + strings.Join(m.labels, "`, `") + "`"
		}
		fmt.Fprintf(&b, "\n### %s\n\n%s; labels: %s\n\n%s\n\nUse: %s\n", m.name, m.kind, labels, m.help, operatorUse[m.name])
	}
	return b.String()
}

func firstSection(title string) int {
	return slices.IndexFunc(metricSections, func(s struct{ title, prefix, intro string }) bool { return s.title == title })
}

// connectorTraffic creates a PostgreSQL source and a JDBC sink whose
// databases do not answer (port 1 on loopback): their tasks start,
// which declares their series, and fail.
func connectorTraffic(t *testing.T, a *agent.Agent) {
	t.Helper()
	for _, body := range []string{
		`{"name":"ref-source","config":{"connector.class":"PostgresConnector","database.hostname":"127.0.0.1","database.port":"1",` +
			`"database.user":"u","database.dbname":"d","topic.prefix":"ref"}}`,
		`{"name":"ref-sink","config":{"connector.class":"JdbcSinkConnector","connection.url":"jdbc:postgresql://127.0.0.1:1/d","topics":"ref"}}`,
	} {
		if got := connDo(t, "http://"+a.ConnectAddr(), connReq{method: "POST", path: "/connectors", body: body}); got.status != http.StatusCreated {
			t.Fatalf("create a connector: %d %s", got.status, got.body)
		}
	}
	for deadline := time.Now().Add(opTimeout); ; time.Sleep(20 * time.Millisecond) {
		fs := parseScrape(t, scrapeBody(t, a))
		_, src := sample(fs, "strand_connect_pgsource_records_total", map[string]string{"connector": "ref-source", "op": "c"})
		_, sink := sample(fs, "strand_connect_sink_rows_total", map[string]string{"connector": "ref-sink", "op": "insert"})
		if src && sink {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the connectors' series: source %v, sink %v", src, sink)
		}
	}
}

// TestMetricsReference checks docs/metrics.md against the registry of
// an agent that served traffic (compaction on, so its metrics are
// registered): the same metrics, types, labels and help, and an
// operator's use for each. -update rewrites it.
func TestMetricsReference(t *testing.T) {
	// An SSL listener beside the PLAINTEXT one (KafkaAddr) serves the
	// certificate expiry metric; authorization on, allowing what no ACL
	// speaks of so the rest of the traffic runs as without it, serves
	// the denial counter (authzTraffic).
	ca := certstest.NewCA(t, "ca")
	server := ca.Server(t, "server")
	// The low-latency tier on two zone directories serves its metrics.
	xdir := t.TempDir()
	a := startWith(t, agent.Config{DataDir: t.TempDir(), Compaction: true,
		ObjStoreExpress: "a=" + filepath.Join(xdir, "a") + ",b=" + filepath.Join(xdir, "b"), ObjStoreExpressZone: "a",
		SchemaRegistryListen: "127.0.0.1:0", SQLListen: "127.0.0.1:0",
		SQLViewSnapshotInterval: 200 * time.Millisecond, ConnectListen: "127.0.0.1:0",
		Listeners: "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", TLSCertFile: server.CertFile, TLSKeyFile: server.KeyFile,
		TLSClientCAFile: ca.CertFile, TLSClientAuth: "requested",
		Authorizer: "standard", AllowEveryoneIfNoACLFound: true}, nil)
	authzTraffic(t, a)
	if got := connDo(t, "http://"+a.ConnectAddr(), connReq{method: "GET", path: "/connectors"}); got.status != http.StatusOK {
		t.Fatalf("GET /connectors: %d %s", got.status, got.body)
	}
	if got := regDo(t, http.DefaultClient, "http://"+a.RegistryAddr(), regReq{method: "GET", path: "/subjects"}); got.status != http.StatusOK {
		t.Fatalf("GET /subjects: %d %s", got.status, got.body)
	}
	// Counted after the answer is written: wait for it.
	checkMetrics(t, a.HTTPAddr(), []metricCheck{{name: "strand_schema_registry_requests_total"}, {name: "strand_connect_http_requests_total"}})
	scrapeWithTraffic(t, a)
	viewMetricsTraffic(t, a)
	sinkAndSnapshotTraffic(t, a)
	connectorTraffic(t, a)
	shareGroupTraffic(t, a)
	ms := registryMetrics(t, a)
	for _, m := range ms {
		if operatorUse[m.name] == "" {
			t.Errorf("%s has no operator use in operatorUse", m.name)
		}
	}
	for name := range operatorUse {
		if !slices.ContainsFunc(ms, func(m referenceMetric) bool { return m.name == name }) {
			t.Errorf("operatorUse names %s, which the agent does not register", name)
		}
	}
	got := renderReference(ms)
	if *update {
		if err := os.WriteFile(referencePath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatalf("%v (go test ./internal/agent -run TestMetricsReference -update writes it)", err)
	}
	if string(want) != got {
		t.Errorf("docs/metrics.md differs from the registry; regenerate it with\n\tgo test ./internal/agent -run TestMetricsReference -update\n%s", firstDiff(string(want), got))
	}
}

// firstDiff shows the first line where the file and the registry's
// reference differ.
func firstDiff(file, registry string) string {
	fl, rl := strings.Split(file, "\n"), strings.Split(registry, "\n")
	for i := range max(len(fl), len(rl)) {
		var f, r string
		if i < len(fl) {
			f = fl[i]
		}
		if i < len(rl) {
			r = rl[i]
		}
		if f != r {
			return fmt.Sprintf("line %d:\n  file:     %q\n  registry: %q", i+1, f, r)
		}
	}
	return ""
}

// authzTraffic denies the anonymous client DESCRIBE on one topic and
// asks for it, so the denial counter has a sample.
func authzTraffic(t *testing.T, a *agent.Agent) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.KafkaAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	b := kadm.NewACLs().Deny("User:ANONYMOUS").Topics("ref-denied").Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	res, err := adm.CreateACLs(ctx, b)
	if err == nil {
		for _, r := range res {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		t.Fatalf("creating the deny ACL: %v", err)
	}
	md, err := adm.Metadata(ctx, "ref-denied")
	if err == nil {
		err = md.Topics["ref-denied"].Err
	}
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("Metadata of the denied topic: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}
