"""Produces and consumes over SSL with a client certificate with
confluent-kafka-python (librdkafka), and prints a JSON verdict."""
import argparse
import json
import sys

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

p = argparse.ArgumentParser()
for a in ("bootstrap", "topic", "ca", "cert", "key"):
    p.add_argument("--" + a, required=True)
p.add_argument("--count", type=int, default=100)
args = p.parse_args()
conf = {
    "bootstrap.servers": args.bootstrap,
    "security.protocol": "SSL",
    "ssl.ca.location": args.ca,
    "ssl.certificate.location": args.cert,
    "ssl.key.location": args.key,
}
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
