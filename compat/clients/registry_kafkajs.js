// kafkajs with @kafkajs/confluent-schema-registry against one agent's
// Kafka port and schema registry: a client library written against
// Confluent's registry, not ours. The runner sets NODE_PATH to where both
// were installed.
//
//   node registry_kafkajs.js produce --bootstrap H:P --registry URL --topic T --format avro|json|protobuf --count N
//     registers the format's Order schema under T-value (the library's
//     register, which first reads the subject's config), encodes records
//     {id: i, name: "order-i"} in Confluent's wire format and produces
//     them; prints {"id": <schema id>, "produced": N}.
//   node registry_kafkajs.js consume --bootstrap H:P --registry URL --topic T --count N
//     reads N records from the start of T, decodes each with the
//     registry (looking its schema up by the id in the record) and
//     prints {"records": [{"id": .., "name": ..}, ...]}.
//
// Optional --user U --password P: HTTP basic auth to the registry.
'use strict'

const arg = (name) => {
  const i = process.argv.indexOf('--' + name)
  return i < 0 ? undefined : process.argv[i + 1]
}
const mode = process.argv[2]
const topic = arg('topic')
const count = parseInt(arg('count') || '10', 10)
const format = arg('format') || 'avro'

const { Kafka, logLevel, CompressionTypes, CompressionCodecs } = require('kafkajs')
// franz-go compresses with snappy by default; kafkajs ships no codec.
CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy')
const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry')

const registryArgs = { host: arg('registry') }
if (arg('user')) registryArgs.auth = { username: arg('user'), password: arg('password') }
const registry = new SchemaRegistry(registryArgs)
const kafka = new Kafka({ clientId: 'strand-registry-test', brokers: [arg('bootstrap')], logLevel: logLevel.NOTHING })

const schemas = {
  avro: {
    type: SchemaType.AVRO,
    schema: JSON.stringify({
      type: 'record', name: 'Order', namespace: 'shop',
      fields: [{ name: 'id', type: 'long' }, { name: 'name', type: 'string' }]
    })
  },
  json: {
    type: SchemaType.JSON,
    schema: JSON.stringify({
      $schema: 'http://json-schema.org/draft-07/schema#',
      title: 'Order', type: 'object',
      properties: { id: { type: 'integer' }, name: { type: 'string' } },
      required: ['id', 'name']
    })
  },
  protobuf: {
    type: SchemaType.PROTOBUF,
    schema: 'syntax = "proto3";\npackage shop;\n\nmessage Order {\n  int64 id = 1;\n  string name = 2;\n}\n'
  }
}

async function produce () {
  const s = schemas[format]
  if (!s) throw new Error(`unknown --format ${format}`)
  const { id } = await registry.register(s, { subject: `${topic}-value` })
  const messages = []
  for (let i = 0; i < count; i++) {
    messages.push({ key: String(i), value: await registry.encode(id, { id: i, name: `order-${i}` }) })
  }
  const producer = kafka.producer()
  await producer.connect()
  await producer.send({ topic, acks: -1, messages })
  await producer.disconnect()
  return { id, produced: count }
}

async function consume () {
  const consumer = kafka.consumer({ groupId: `registry-kafkajs-${topic}-${Date.now()}` })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const records = []
  let failed
  await new Promise((resolve) => {
    const timer = setTimeout(resolve, 60000)
    // A consumer that cannot read (a codec missing, say) crashes
    // quietly at this log level: say why instead of timing out.
    consumer.on(consumer.events.CRASH, ({ payload }) => {
      failed = failed || payload.error
      clearTimeout(timer)
      resolve()
    })
    consumer.run({
      eachMessage: async ({ message }) => {
        try {
          const v = await registry.decode(message.value)
          // Avro longs and Protobuf int64 arrive as numbers or Long
          // objects depending on the library: normalise to a number.
          records.push({ id: Number(v.id), name: v.name })
        } catch (e) {
          failed = failed || e
        }
        if (records.length >= count || failed) {
          clearTimeout(timer)
          resolve()
        }
      }
    })
  })
  await consumer.disconnect()
  if (failed) throw failed
  return { records }
}

const run = { produce, consume }[mode]
if (!run) {
  process.stderr.write('usage: registry_kafkajs.js produce|consume --bootstrap H:P --registry URL --topic T ...\n')
  process.exit(2)
}
run().then(
  (res) => { process.stdout.write(JSON.stringify(res) + '\n'); process.exit(0) },
  (e) => { process.stdout.write(JSON.stringify({ error: String(e && e.stack || e) }) + '\n'); process.exit(1) }
)
