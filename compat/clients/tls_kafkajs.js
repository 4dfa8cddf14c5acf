// Produces and consumes with kafkajs over --protocol (SSL by default,
// with a client certificate when --cert is given; SASL_SSL or
// SASL_PLAINTEXT with --mechanism, --user and --password) and prints a
// JSON verdict: {"produced", "consumed", "error"}.
const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const arg = (name) => {
  const i = process.argv.indexOf('--' + name)
  return i < 0 ? undefined : process.argv[i + 1]
}
const count = parseInt(arg('count') || '100', 10)
const topic = arg('topic')
const protocol = arg('protocol') || 'SSL'
const config = { clientId: 'strand-tls-test', brokers: [arg('bootstrap')], logLevel: logLevel.NOTHING }
if (protocol.includes('SSL')) {
  config.ssl = { ca: [fs.readFileSync(arg('ca'))] }
  if (arg('cert')) {
    config.ssl.cert = fs.readFileSync(arg('cert'))
    config.ssl.key = fs.readFileSync(arg('key'))
  }
}
if (arg('mechanism')) {
  config.sasl = { mechanism: arg('mechanism').toLowerCase(), username: arg('user'), password: arg('password') }
}
const kafka = new Kafka(config)

async function main () {
  const res = { produced: 0, consumed: 0, error: '' }
  try {
    const producer = kafka.producer()
    await producer.connect()
    const messages = []
    for (let i = 0; i < count; i++) messages.push({ value: 'v' + i })
    const acks = await producer.send({ topic, acks: -1, messages })
    res.produced = acks.length > 0 ? count : 0
    await producer.disconnect()

    const consumer = kafka.consumer({ groupId: 'tls-test-' + topic })
    await consumer.connect()
    await consumer.subscribe({ topic, fromBeginning: true })
    const seen = new Set()
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => resolve(), 30000)
      consumer.run({
        eachMessage: async ({ message }) => {
          seen.add(message.value.toString())
          if (seen.size >= count) { clearTimeout(timer); resolve() }
        },
      }).catch(reject)
    })
    await consumer.disconnect()
    for (let i = 0; i < count; i++) if (seen.has('v' + i)) res.consumed++
  } catch (e) {
    res.error = String(e)
  }
  console.log(JSON.stringify(res))
  process.exit(res.error ? 1 : 0)
}
main()
