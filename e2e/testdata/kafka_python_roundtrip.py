"""Round-trip records through a Kafka broker with kafka-python 2.0.2.

A producer (acks=all) sends --count keyed records to --topic and keeps the
(partition, offset) each was acknowledged at; a consumer without a group
(assigned partitions, auto_offset_reset=earliest) reads the topic back.
api_version is left to auto-detection, so the client negotiates what it
sends from the broker's ApiVersions answer.

Prints one JSON object and exits 0 only if every acknowledged record was
read back at its offset with its key and value, and nothing else was read.
"""

import argparse
import json
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--timeout-s", type=float, default=30.0)
    args = ap.parse_args()

    result = {"sent": 0, "acked": 0, "received": 0, "errors": []}

    producer = KafkaProducer(
        bootstrap_servers=args.bootstrap,
        acks="all",
        retries=0,
        linger_ms=5,
        request_timeout_ms=int(args.timeout_s * 1000),
    )
    result["api_version"] = list(producer.config["api_version"])
    futures = []
    for i in range(args.count):
        key = ("key-%d" % (i % 100)).encode()
        value = ("value-%06d" % i).encode()
        futures.append((key, value, producer.send(args.topic, key=key, value=value)))
    producer.flush(timeout=args.timeout_s)
    result["sent"] = len(futures)

    acked = {}
    for key, value, fut in futures:
        try:
            md = fut.get(timeout=args.timeout_s)
        except Exception as e:  # the error goes into the JSON result
            result["errors"].append("produce %r: %r" % (value, e))
            continue
        if (md.partition, md.offset) in acked:
            result["errors"].append("offset %d/%d acknowledged twice" % (md.partition, md.offset))
        acked[(md.partition, md.offset)] = (key, value)
    producer.close(timeout=args.timeout_s)
    result["acked"] = len(acked)

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=2000,
    )
    partitions = consumer.partitions_for_topic(args.topic) or set()
    result["partitions"] = sorted(partitions)
    tps = [TopicPartition(args.topic, p) for p in sorted(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    result["end_offsets"] = {str(tp.partition): off for tp, off in ends.items()}

    got = {}
    deadline = time.monotonic() + args.timeout_s
    while len(got) < len(acked) and time.monotonic() < deadline:
        # consumer_timeout_ms ends the iteration after 2 s without a record.
        for msg in consumer:
            k = (msg.partition, msg.offset)
            if k in got:
                result["errors"].append("offset %d/%d read twice" % k)
            got[k] = (msg.key, msg.value)
            if len(got) >= len(acked):
                break
    consumer.close()
    result["received"] = len(got)

    for k, (key, value) in sorted(acked.items()):
        if k not in got:
            result["errors"].append("offset %d/%d (%r) not read back" % (k[0], k[1], value))
        elif got[k] != (key, value):
            result["errors"].append("offset %d/%d: read %r, acknowledged %r" % (k[0], k[1], got[k], (key, value)))
    for k in sorted(set(got) - set(acked)):
        result["errors"].append("offset %d/%d read but never acknowledged" % k)
    for tp, off in ends.items():
        n = sum(1 for (p, _) in acked if p == tp.partition)
        if off != n:
            result["errors"].append("partition %d: end offset %d, acknowledged %d" % (tp.partition, off, n))

    del result["errors"][20:]
    ok = result["acked"] == args.count and not result["errors"]
    print(json.dumps(result, sort_keys=True))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
