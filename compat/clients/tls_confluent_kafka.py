"""Produces and consumes with confluent-kafka-python (librdkafka) over
--protocol (SSL by default, with a client certificate when --cert is
given; SASL_SSL or SASL_PLAINTEXT with --mechanism, --user and
--password) and prints a JSON verdict: {"produced", "consumed", "error"}."""
import argparse
import json
import sys

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

p = argparse.ArgumentParser()
for a in ("bootstrap", "topic"):
    p.add_argument("--" + a, required=True)
for a in ("ca", "cert", "key", "mechanism", "user", "password"):
    p.add_argument("--" + a)
p.add_argument("--protocol", default="SSL")
p.add_argument("--count", type=int, default=100)
args = p.parse_args()
conf = {"bootstrap.servers": args.bootstrap, "security.protocol": args.protocol}
if "SSL" in args.protocol:
    conf["ssl.ca.location"] = args.ca
    if args.cert:
        conf["ssl.certificate.location"] = args.cert
        conf["ssl.key.location"] = args.key
if args.mechanism:
    conf.update({"sasl.mechanisms": args.mechanism, "sasl.username": args.user, "sasl.password": args.password})
res = {"produced": 0, "consumed": 0, "error": ""}
errors = []
try:
    prod = Producer(dict(conf, acks="all"))
    acked = []

    def report(err, msg):
        if err is None:
            acked.append(msg.offset())
        else:
            errors.append(str(err))

    for i in range(args.count):
        prod.produce(args.topic, ("v%d" % i).encode(), on_delivery=report)
    left = prod.flush(30)
    res["produced"] = len(acked)
    if left or errors:
        raise RuntimeError("%d undelivered, errors %s" % (left, errors[:3]))
    cons = Consumer(dict(conf, **{"group.id": "tls-test", "enable.auto.commit": False}))
    cons.assign([TopicPartition(args.topic, 0, OFFSET_BEGINNING)])
    seen = set()
    misses = 0
    while len(seen) < args.count and misses < 20:
        m = cons.poll(1.0)
        if m is None:
            misses += 1
            continue
        if m.error():
            raise RuntimeError(str(m.error()))
        seen.add(m.value().decode())
    cons.close()
    res["consumed"] = len(seen & {"v%d" % i for i in range(args.count)})
except Exception as e:
    res["error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(res))
sys.exit(1 if res["error"] else 0)
