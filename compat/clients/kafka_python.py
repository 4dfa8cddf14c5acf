"""kafka-python against one agent, for the compatibility matrix.

kafka-python picks the protocol versions it sends from the broker version
it infers from ApiVersions, so api_version is left to auto-detection, as
a user would leave it. See compatlib for the output.
"""

import kafka
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

import compatlib as C

PARTITIONS = 3


def main():
    args = C.parse_args()
    C.client("kafka-python", kafka.__version__)
    boot = args.bootstrap
    base = args.prefix + "-kpy"
    timeout_ms = int(args.timeout_s * 1000)
    admin = None
    try:
        admin = KafkaAdminClient(bootstrap_servers=boot, request_timeout_ms=timeout_ms)
    except Exception as e:  # each cell that needs a topic reports it
        C.note("admin client: %r" % e)

    def ensure_topic(name):
        # Through the admin API when it works; otherwise the producer's
        # metadata request auto-creates the topic.
        if admin is None:
            return
        try:
            admin.create_topics([NewTopic(name, PARTITIONS, 1)], timeout_ms=timeout_ms)
        except Exception:
            pass

    def produce(topic, msgs, **cfg):
        p = KafkaProducer(bootstrap_servers=boot, acks="all", linger_ms=5, request_timeout_ms=timeout_ms, **cfg)
        try:
            futs = [p.send(topic, key=k, value=v) for k, v in msgs]
            p.flush(timeout=args.timeout_s)
            for f in futs:
                f.get(timeout=args.timeout_s)
            return list(p.config["api_version"])
        finally:
            p.close(timeout=args.timeout_s)

    def read_assigned(topic, n):
        c = KafkaConsumer(bootstrap_servers=boot, group_id=None, enable_auto_commit=False,
                          auto_offset_reset="earliest", request_timeout_ms=timeout_ms + 1000)
        try:
            parts = c.partitions_for_topic(topic) or set()
            tps = [TopicPartition(topic, p) for p in sorted(parts)]
            c.assign(tps)
            c.seek_to_beginning(*tps)
            return poll(c, n)
        finally:
            c.close()

    def poll(c, n):
        got = []
        dl = C.Deadline(args.timeout_s)
        while len(got) < n and not dl.passed():
            for recs in c.poll(timeout_ms=200).values():
                got.extend((r.partition, r.offset, r.key, r.value) for r in recs)
        return got

    def roundtrip(cap, topic, **cfg):
        def run():
            ensure_topic(topic)
            msgs = C.messages(args.count, cap)
            ver = produce(topic, msgs, **cfg)
            C.compare(msgs, read_assigned(topic, len(msgs)))
            claims = {"topic": topic, "produced": len(msgs)}
            if "compression_type" in cfg:
                claims["codec"] = cfg["compression_type"]
            return "%d records produced (acks=all) and read back; inferred broker %s" % (len(msgs), ".".join(map(str, ver))), claims
        return C.check(cap, run)

    if "produce" in args.caps or "consume" in args.caps:
        ok = roundtrip("produce", base)
        if "consume" in args.caps:
            if ok:
                C.result("consume", "pass", "assigned partitions read from the beginning, every record once, in order")
            else:
                C.result("consume", "fail", "produce failed, nothing to consume")

    for codec in ("gzip", "snappy", "lz4", "zstd"):
        if codec in args.caps:
            roundtrip(codec, "%s-%s" % (base, codec), compression_type=codec)

    if "groups" in args.caps or "offset-commit" in args.caps:
        topic, group = base + "-group", base + "-g"
        state = {}

        def groups():
            ensure_topic(topic)
            msgs = C.messages(args.count, "group")
            produce(topic, msgs)
            c = KafkaConsumer(topic, bootstrap_servers=boot, group_id=group, enable_auto_commit=False,
                              auto_offset_reset="earliest", request_timeout_ms=timeout_ms + 1000)
            state["consumer"] = c
            C.compare(msgs, poll(c, len(msgs)))
            if not c.assignment():
                raise C.CheckFailed("no partitions assigned")
            return "joined %s, %d partitions assigned, %d records read" % (group, len(c.assignment()), len(msgs)), {"topic": topic, "produced": len(msgs)}

        def commit():
            c = state.get("consumer")
            if c is None:
                raise C.CheckFailed("the group consumer did not start")
            c.commit()
            total = 0
            for tp in c.assignment():
                off = c.committed(tp)
                if off is None:
                    raise C.CheckFailed("no committed offset for %s/%d" % (tp.topic, tp.partition))
                total += off
            if total != args.count:
                raise C.CheckFailed("committed offsets add up to %d, want %d" % (total, args.count))
            return "commit() then committed() per partition", {"topic": topic, "group": group, "committed": total}

        try:
            if "groups" in args.caps:
                C.check("groups", groups)
            else:
                groups()
            if "offset-commit" in args.caps:
                C.check("offset-commit", commit)
        finally:
            if "consumer" in state:
                state["consumer"].close()

    if "idempotence" in args.caps:
        C.result("idempotence", "n/a", "kafka-python %s has no idempotent producer" % kafka.__version__)
    if "transactions" in args.caps:
        C.result("transactions", "n/a", "kafka-python %s has no transactions" % kafka.__version__)

    if "admin" in args.caps:
        def adm():
            if admin is None:
                raise C.CheckFailed("admin client did not start")
            name = base + "-admin"
            admin.create_topics([NewTopic(name, 2, 1, topic_configs={"retention.ms": "3600000"})], timeout_ms=timeout_ms)
            if name not in admin.list_topics():
                raise C.CheckFailed("created topic %s not listed" % name)
            res = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
            found = None
            for r in res:
                for topic_res in r.resources:
                    for entry in topic_res[4]:
                        if entry[0] == "retention.ms":
                            found = entry[1]
            if found != "3600000":
                raise C.CheckFailed("describe_configs retention.ms = %r, want 3600000" % found)
            admin.delete_topics([name], timeout_ms=timeout_ms)
            dl = C.Deadline(args.timeout_s)
            while name in admin.list_topics():
                if dl.passed():
                    raise C.CheckFailed("deleted topic %s still listed" % name)
            groups = [g[0] for g in admin.list_consumer_groups()]
            return "create_topics with a config, list_topics, describe_configs, delete_topics, list_consumer_groups (%d groups)" % len(groups), {}
        C.check("admin", adm)
        missing = [m for m in ("perform_leader_election", "alter_partition_reassignments", "list_partition_reassignments")
                   if not hasattr(admin, m)]
        if missing:
            C.note("KafkaAdminClient %s has no %s: ElectLeaders and partition reassignments not called" % (kafka.__version__, ", ".join(missing)))

    if admin is not None:
        admin.close()


if __name__ == "__main__":
    main()
