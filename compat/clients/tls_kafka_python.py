"""Produces and consumes with kafka-python over --protocol (SSL by
default, with a client certificate when --cert is given; SASL_SSL or
SASL_PLAINTEXT with --mechanism, --user and --password) and prints a
JSON verdict: {"produced", "consumed", "error"}."""
import argparse
import json
import sys

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

p = argparse.ArgumentParser()
for a in ("bootstrap", "topic"):
    p.add_argument("--" + a, required=True)
for a in ("ca", "cert", "key", "mechanism", "user", "password"):
    p.add_argument("--" + a)
p.add_argument("--protocol", default="SSL")
p.add_argument("--count", type=int, default=100)
args = p.parse_args()
ssl = dict(security_protocol=args.protocol)
if "SSL" in args.protocol:
    ssl.update(ssl_cafile=args.ca, ssl_certfile=args.cert, ssl_keyfile=args.key)
if args.mechanism:
    ssl.update(sasl_mechanism=args.mechanism, sasl_plain_username=args.user, sasl_plain_password=args.password)
res = {"produced": 0, "consumed": 0, "error": ""}
try:
    prod = KafkaProducer(bootstrap_servers=args.bootstrap, acks="all", **ssl)
    futs = [prod.send(args.topic, ("v%d" % i).encode()) for i in range(args.count)]
    prod.flush(30)
    res["produced"] = sum(1 for f in futs if f.get(timeout=30) is not None)
    prod.close()
    cons = KafkaConsumer(bootstrap_servers=args.bootstrap, consumer_timeout_ms=10000, **ssl)
    tp = TopicPartition(args.topic, 0)
    cons.assign([tp])
    cons.seek_to_beginning(tp)
    seen = set()
    for m in cons:
        seen.add(m.value.decode())
        if len(seen) == args.count:
            break
    cons.close()
    res["consumed"] = len(seen & {"v%d" % i for i in range(args.count)})
except Exception as e:  # the verdict says what failed
    res["error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(res))
sys.exit(1 if res["error"] else 0)
