"""confluent-kafka-python (librdkafka) against one agent, for the
compatibility matrix. See compatlib for the output."""

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

import compatlib as C

PARTITIONS = 3


def main():
    args = C.parse_args()
    C.client("confluent-kafka-python", "%s (librdkafka %s)" % (confluent_kafka.version()[0], confluent_kafka.libversion()[0]))
    boot = args.bootstrap
    base = args.prefix + "-ck"
    admin = AdminClient({"bootstrap.servers": boot})

    def ensure_topic(name, partitions=PARTITIONS, config=None):
        fs = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], request_timeout=args.timeout_s)
        for f in fs.values():
            f.result(timeout=args.timeout_s)

    def produce(topic, msgs, **cfg):
        conf = {"bootstrap.servers": boot, "acks": "all", "linger.ms": 5}
        conf.update(cfg)
        p = Producer(conf)
        errs = []

        def delivered(err, msg):
            if err is not None:
                errs.append(err)

        for k, v in msgs:
            while True:
                try:
                    p.produce(topic, key=k, value=v, on_delivery=delivered)
                    break
                except BufferError:
                    p.poll(0.1)
        left = p.flush(args.timeout_s)
        if left:
            raise C.CheckFailed("%d records not delivered after %.0fs" % (left, args.timeout_s))
        if errs:
            raise C.CheckFailed("%d delivery errors, first: %s" % (len(errs), errs[0]))
        return p

    def poll(c, n):
        got = []
        dl = C.Deadline(args.timeout_s)
        while len(got) < n and not dl.passed():
            for m in c.consume(num_messages=500, timeout=0.2):
                if m.error():
                    raise KafkaException(m.error())
                got.append((m.partition(), m.offset(), m.key(), m.value()))
        return got

    def read_assigned(topic, n, **cfg):
        conf = {"bootstrap.servers": boot, "group.id": base + "-reader", "enable.auto.commit": False,
                "fetch.wait.max.ms": 50}
        conf.update(cfg)
        c = Consumer(conf)
        try:
            md = c.list_topics(topic, timeout=args.timeout_s)
            parts = sorted(md.topics[topic].partitions)
            c.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in parts])
            return poll(c, n)
        finally:
            c.close()

    def roundtrip(cap, topic, claims=None, **cfg):
        def run():
            ensure_topic(topic)
            msgs = C.messages(args.count, cap)
            produce(topic, msgs, **cfg)
            C.compare(msgs, read_assigned(topic, len(msgs)))
            out = {"topic": topic, "produced": len(msgs)}
            out.update(claims or {})
            return "%d records produced (acks=all) and read back" % len(msgs), out
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
            roundtrip(codec, "%s-%s" % (base, codec), {"codec": codec}, **{"compression.type": codec})

    if "groups" in args.caps or "offset-commit" in args.caps:
        topic, group = base + "-group", base + "-g"
        state = {}

        def groups():
            ensure_topic(topic)
            msgs = C.messages(args.count, "group")
            produce(topic, msgs)
            c = Consumer({"bootstrap.servers": boot, "group.id": group, "enable.auto.commit": False,
                          "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50})
            state["consumer"] = c
            c.subscribe([topic])
            C.compare(msgs, poll(c, len(msgs)))
            if not c.assignment():
                raise C.CheckFailed("no partitions assigned")
            return "subscribed in %s, %d partitions assigned, %d records read" % (group, len(c.assignment()), len(msgs)), {"topic": topic, "produced": len(msgs)}

        def commit():
            c = state.get("consumer")
            if c is None:
                raise C.CheckFailed("the group consumer did not start")
            c.commit(asynchronous=False)
            total = 0
            for tp in c.committed(c.assignment(), timeout=args.timeout_s):
                if tp.error or tp.offset < 0:
                    raise C.CheckFailed("%s/%d: committed %d (%s)" % (tp.topic, tp.partition, tp.offset, tp.error))
                total += tp.offset
            if total != args.count:
                raise C.CheckFailed("committed offsets add up to %d, want %d" % (total, args.count))
            return "synchronous commit, then committed()", {"topic": topic, "group": group, "committed": total}

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
        roundtrip("idempotence", base + "-idem", {"idempotent": True}, **{"enable.idempotence": True})

    if "transactions" in args.caps:
        def txn():
            topic = base + "-txn"
            ensure_topic(topic)
            p = Producer({"bootstrap.servers": boot, "transactional.id": base + "-tx", "linger.ms": 5})
            p.init_transactions(args.timeout_s)
            first = C.messages(args.count, "committed")
            aborted = C.messages(args.count // 2 or 1, "aborted")
            last = C.messages(args.count // 2 or 1, "after")
            for batch, end in ((first, p.commit_transaction), (aborted, p.abort_transaction), (last, p.commit_transaction)):
                p.begin_transaction()
                for k, v in batch:
                    while True:
                        try:
                            p.produce(topic, key=k, value=v)
                            break
                        except BufferError:
                            p.poll(0.1)
                end(args.timeout_s)
            # The aborted transaction sits between two committed ones, so
            # reading the last one means read_committed skipped it.
            committed = first + last
            got = read_assigned(topic, len(committed), **{"isolation.level": "read_committed"})
            C.compare(committed, got)
            return "committed, aborted, committed transactions; read_committed sees exactly the committed records", {"topic": topic, "txn_committed": len(committed)}
        C.check("transactions", txn)

    if "admin" in args.caps:
        def adm():
            name = base + "-admin"
            ensure_topic(name, 2, {"retention.ms": "3600000"})
            md = admin.list_topics(timeout=args.timeout_s)
            if name not in md.topics or len(md.topics[name].partitions) != 2:
                raise C.CheckFailed("created topic %s not listed with 2 partitions" % name)
            res = ConfigResource(ConfigResource.Type.TOPIC, name)
            cfg = admin.describe_configs([res])[res].result(timeout=args.timeout_s)
            if cfg["retention.ms"].value != "3600000":
                raise C.CheckFailed("describe_configs retention.ms = %r" % cfg["retention.ms"].value)
            for f in admin.create_partitions([confluent_kafka.admin.NewPartitions(name, 4)]).values():
                f.result(timeout=args.timeout_s)
            if len(admin.list_topics(name, timeout=args.timeout_s).topics[name].partitions) != 4:
                raise C.CheckFailed("create_partitions to 4 not visible")
            for f in admin.delete_topics([name]).values():
                f.result(timeout=args.timeout_s)
            groups = admin.list_groups(timeout=args.timeout_s)
            return "create_topics with a config, list_topics, describe_configs, create_partitions, delete_topics, list_groups (%d groups)" % len(groups), {}
        C.check("admin", adm)
        missing = [m for m in ("elect_leaders", "alter_partition_reassignments", "list_partition_reassignments")
                   if not hasattr(admin, m)]
        if missing:
            C.note("AdminClient %s (librdkafka %s) has no %s: ElectLeaders and partition reassignments not called"
                   % (confluent_kafka.version()[0], confluent_kafka.libversion()[0], ", ".join(missing)))


if __name__ == "__main__":
    main()
