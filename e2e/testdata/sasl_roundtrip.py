"""Produce and consume over a SASL listener with kafka-python or
confluent-kafka-python.

--client picks the library; --protocol (SASL_PLAINTEXT or SASL_SSL),
--mechanism, --user and --cafile configure it, and the password is read
from $SASL_PASSWORD so it is on no command line. The producer sends
--count records to --topic (acks=all); a consumer without a group
(assigned to partition 0, from the beginning) reads them back.

With --expect-auth-failure it only tries to produce one record and
reports the error the library raised.

Prints one JSON object: {"sent", "received", "error"}.
"""

import argparse
import json
import os
import sys
import time


def kafka_python(args, password):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    common = dict(
        bootstrap_servers=args.bootstrap,
        security_protocol=args.protocol,
        sasl_mechanism=args.mechanism,
        sasl_plain_username=args.user,
        sasl_plain_password=password,
        request_timeout_ms=int(args.timeout_s * 1000),
    )
    if args.cafile:
        common["ssl_cafile"] = args.cafile
        common["ssl_check_hostname"] = False
    producer = KafkaProducer(acks="all", retries=0, **common)
    futures = [producer.send(args.topic, value=("v-%06d" % i).encode()) for i in range(args.count)]
    producer.flush(timeout=args.timeout_s)
    for f in futures:
        f.get(timeout=args.timeout_s)
    producer.close()
    consumer = KafkaConsumer(auto_offset_reset="earliest", enable_auto_commit=False, **common)
    consumer.assign([TopicPartition(args.topic, 0)])
    consumer.seek_to_beginning()
    got = []
    deadline = time.time() + args.timeout_s
    while len(got) < args.count and time.time() < deadline:
        for recs in consumer.poll(timeout_ms=500).values():
            got.extend(r.value.decode() for r in recs)
    consumer.close()
    return len(futures), got


def confluent(args, password):
    from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING

    common = {
        "bootstrap.servers": args.bootstrap,
        "security.protocol": args.protocol,
        "sasl.mechanisms": args.mechanism,
        "sasl.username": args.user,
        "sasl.password": password,
    }
    if args.cafile:
        common["ssl.ca.location"] = args.cafile
    errors = []

    def delivered(err, _msg):
        if err is not None:
            errors.append(str(err))

    producer = Producer(dict(common, **{"acks": "all", "message.timeout.ms": int(args.timeout_s * 1000),
                                        "error_cb": lambda e: errors.append(str(e))}))
    for i in range(args.count):
        producer.produce(args.topic, value=("v-%06d" % i).encode(), on_delivery=delivered)
        producer.poll(0)
    left = producer.flush(args.timeout_s)
    if errors or left:
        raise RuntimeError("produce: %d undelivered, errors %s" % (left, errors[:3]))
    consumer = Consumer(dict(common, **{"group.id": "sasl-roundtrip", "enable.auto.commit": False}))
    consumer.assign([TopicPartition(args.topic, 0, OFFSET_BEGINNING)])
    got = []
    deadline = time.time() + args.timeout_s
    while len(got) < args.count and time.time() < deadline:
        m = consumer.poll(0.5)
        if m is None:
            continue
        if m.error():
            raise RuntimeError("consume: %s" % m.error())
        got.append(m.value().decode())
    consumer.close()
    return args.count, got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", required=True, choices=["kafka-python", "confluent-kafka-python"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--protocol", required=True)
    ap.add_argument("--mechanism", required=True)
    ap.add_argument("--user", required=True)
    ap.add_argument("--cafile", default="")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--timeout-s", type=float, default=20.0)
    ap.add_argument("--expect-auth-failure", action="store_true")
    args = ap.parse_args()
    password = os.environ["SASL_PASSWORD"]
    if args.expect_auth_failure:
        args.count, args.timeout_s = 1, 5.0
    run = kafka_python if args.client == "kafka-python" else confluent
    out = {"sent": 0, "received": 0, "error": ""}
    try:
        sent, got = run(args, password)
        out["sent"], out["received"] = sent, len(got)
        want = ["v-%06d" % i for i in range(args.count)]
        if got[: args.count] != want:
            out["error"] = "read back %d records, first %s" % (len(got), got[:3])
    except Exception as e:  # the test reads the error
        out["error"] = "%s: %s" % (type(e).__name__, e)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
