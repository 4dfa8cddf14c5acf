// Produce and consume over a SASL listener with kafkajs; the runner sets
// NODE_PATH to where kafkajs is installed. The password is read from
// $SASL_PASSWORD. With --expect-auth-failure it only tries to connect a
// producer and reports the error.
//
// usage: node sasl_roundtrip.js --bootstrap H:P --protocol SASL_SSL
//   --mechanism SCRAM-SHA-512 --user U --cafile F --topic T --count N
// Prints one JSON object: {"sent", "received", "error"}.
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const args = { count: 100, cafile: '' }
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i]
  if (a === '--expect-auth-failure') { args.expectFailure = true; continue }
  args[a.replace(/^--/, '')] = process.argv[++i]
}
args.count = Number(args.count)

async function run () {
  const kafka = new Kafka({
    clientId: 'sasl-roundtrip',
    brokers: [args.bootstrap],
    ssl: args.protocol === 'SASL_SSL' ? { ca: [fs.readFileSync(args.cafile)] } : false,
    sasl: { mechanism: args.mechanism.toLowerCase(), username: args.user, password: process.env.SASL_PASSWORD },
    logLevel: logLevel.NOTHING,
    retry: { retries: args.expectFailure ? 0 : 3 },
    connectionTimeout: 5000
  })
  const producer = kafka.producer()
  await producer.connect()
  if (args.expectFailure) {
    await producer.disconnect()
    return { sent: 0, received: 0 }
  }
  const messages = []
  for (let i = 0; i < args.count; i++) messages.push({ value: 'v-' + String(i).padStart(6, '0') })
  await producer.send({ topic: args.topic, acks: -1, messages })
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: 'sasl-roundtrip-' + args.topic })
  await consumer.connect()
  await consumer.subscribe({ topic: args.topic, fromBeginning: true })
  const got = []
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`read ${got.length} of ${args.count} in 30s`)), 30000)
    consumer.run({
      eachMessage: async ({ message }) => {
        got.push(message.value.toString())
        if (got.length >= args.count) { clearTimeout(timer); resolve() }
      }
    }).catch(reject)
  })
  await consumer.disconnect()
  for (let i = 0; i < args.count; i++) {
    if (got[i] !== messages[i].value) throw new Error(`record ${i}: ${got[i]}`)
  }
  return { sent: args.count, received: got.length }
}

run().then(
  r => { process.stdout.write(JSON.stringify(Object.assign({ error: '' }, r)) + '\n'); process.exit(0) },
  e => { process.stdout.write(JSON.stringify({ sent: 0, received: 0, error: `${e.name}: ${e.message}` }) + '\n'); process.exit(0) }
)
