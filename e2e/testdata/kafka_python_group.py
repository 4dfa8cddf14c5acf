"""Consume a topic as a member of a consumer group with kafka-python 2.0.2.

The consumer subscribes to --topic in --group (auto_offset_reset=earliest,
enable_auto_commit=False), so it starts where the group's committed offsets
say, or at the beginning where there are none. It polls until it owns every
partition of the topic and its position in each has reached the end offset
it listed once it owned them, commits synchronously and leaves the group.
api_version is left to auto-detection, which decides the group protocol
versions it sends; for a broker it detects as 0.11 or later they are
FindCoordinator v0, JoinGroup v2, SyncGroup v1, Heartbeat v1,
LeaveGroup v1, OffsetCommit v2 and OffsetFetch v1.

Prints one JSON object: what it owned, where each partition started and
ended, every record it read (partition, offset, value), and the committed
offsets as the client holds them after its commit (the caller reads the
group's offsets from the broker itself). Exits 0 unless something failed;
the caller checks the numbers.
"""

import argparse
import json
import sys
import time

from kafka import KafkaConsumer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--timeout-s", type=float, default=30.0)
    args = ap.parse_args()

    result = {"records": [], "errors": []}
    consumer = KafkaConsumer(
        args.topic,
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id="kafka-python-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        # The coordinator's smallest session timeout; the script leaves
        # the group when it is done, so nothing waits for it.
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        fetch_max_wait_ms=100,
        request_timeout_ms=int(args.timeout_s * 1000) + 1000,
    )
    result["api_version"] = list(consumer.config["api_version"])
    try:
        consume(consumer, args, result)
    except Exception as e:  # the error goes into the JSON result
        result["errors"].append("consume: %r" % (e,))
    finally:
        consumer.close(autocommit=False)

    del result["errors"][20:]
    print(json.dumps(result, sort_keys=True))
    return 0 if not result["errors"] else 1


def consume(consumer, args, result):
    deadline = time.monotonic() + args.timeout_s
    ends = None
    while time.monotonic() < deadline:
        batches = consumer.poll(timeout_ms=200)
        for tp, msgs in sorted(batches.items()):
            for m in msgs:
                result["records"].append([m.partition, m.offset, m.value.decode()])
        owned = consumer.assignment()
        all_parts = consumer.partitions_for_topic(args.topic) or set()
        if not owned or {tp.partition for tp in owned} != all_parts:
            # Not yet a member (the first poll joins), or sharing the
            # topic: this script expects to be alone in its group.
            ends = None
            continue
        if ends is None:
            tps = sorted(owned)
            ends = consumer.end_offsets(tps)
            result["assignment"] = sorted(tp.partition for tp in tps)
            result["end_offsets"] = {str(tp.partition): off for tp, off in ends.items()}
        if all(consumer.position(tp) >= end for tp, end in ends.items()):
            break
    else:
        result["errors"].append("not at the end offsets %r after %.0f s" % (
            {str(tp.partition): end for tp, end in (ends or {}).items()}, args.timeout_s))
        return

    result["positions"] = {str(tp.partition): consumer.position(tp) for tp in ends}
    consumer.commit()
    result["committed"] = {str(tp.partition): consumer.committed(tp) for tp in ends}


if __name__ == "__main__":
    sys.exit(main())
