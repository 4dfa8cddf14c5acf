#!/usr/bin/env python3
"""confluent-kafka-python's JSON Schema serializer against one agent's Kafka
port and schema registry: a client written against Confluent's registry,
not ours. Debian's confluent-kafka has no Avro serializer here (it needs
fastavro, which Debian does not package), so JSON Schema is its format.

  registry_confluent_kafka.py produce --bootstrap H:P --registry URL --topic T --count N
    JSONSerializer registers the Order schema under T-value (its
    auto.register.schemas) and frames records {"id": i, "name": "order-i"};
    prints {"id": <schema id>, "produced": N}.
  registry_confluent_kafka.py consume --bootstrap H:P --registry URL --topic T --count N
    reads N records from the start of T; for each, asks the registry
    for the schema of the record's id (SchemaRegistryClient.get_schema),
    and decodes the record with a JSONDeserializer built from that
    schema (which validates the payload against it); prints
    {"records": [...], "schema_ids": [...]}.

Optional --user U --password P: HTTP basic auth to the registry.
"""
import argparse
import json
import struct
import sys

from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

ORDER_SCHEMA = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
    "required": ["id", "name"],
})


def registry_client(args):
    conf = {"url": args.registry}
    if args.user:
        conf["basic.auth.user.info"] = "%s:%s" % (args.user, args.password)
    return SchemaRegistryClient(conf)


def produce(args):
    sr = registry_client(args)
    ser = JSONSerializer(ORDER_SCHEMA, sr)
    p = Producer({"bootstrap.servers": args.bootstrap, "acks": "all"})
    errors = []
    schema_id = None
    for i in range(args.count):
        value = ser({"id": i, "name": "order-%d" % i}, SerializationContext(args.topic, MessageField.VALUE))
        schema_id = struct.unpack(">bI", value[:5])[1]
        p.produce(args.topic, key=str(i), value=value,
                  on_delivery=lambda err, msg: err and errors.append(str(err)))
    p.flush(60)
    if errors:
        raise RuntimeError("delivery failed: %s" % errors[:3])
    return {"id": schema_id, "produced": args.count}


def consume(args):
    sr = registry_client(args)
    c = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "registry-py-" + args.topic,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([args.topic])
    records, ids, decoders = [], [], {}
    idle = 0
    while len(records) < args.count and idle < 60:
        msg = c.poll(1.0)
        if msg is None:
            idle += 1
            continue
        if msg.error():
            raise RuntimeError(str(msg.error()))
        schema_id = struct.unpack(">bI", msg.value()[:5])[1]
        if schema_id not in decoders:
            decoders[schema_id] = JSONDeserializer(sr.get_schema(schema_id).schema_str)
            ids.append(schema_id)
        v = decoders[schema_id](msg.value(), SerializationContext(args.topic, MessageField.VALUE))
        records.append({"id": v["id"], "name": v["name"]})
    c.close()
    return {"records": records, "schema_ids": ids}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["produce", "consume"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--registry", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--count", type=int, default=10)
    ap.add_argument("--format", default="json", choices=["json"])
    ap.add_argument("--user")
    ap.add_argument("--password")
    args = ap.parse_args()
    try:
        res = produce(args) if args.mode == "produce" else consume(args)
    except Exception as e:  # the runner reads the reason from the line
        print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}))
        return 1
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
