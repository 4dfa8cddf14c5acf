// A librdkafka producer (node-rdkafka, librdkafka 2.5 or later, which
// pushes KIP-714 client metrics by default when the broker serves
// GetTelemetrySubscriptions and PushTelemetry). It produces one message
// a second to --topic until its stdin closes, then disconnects (which
// sends the terminating push). The runner sets NODE_PATH to where
// node-rdkafka is installed.
//
// usage: node rdkafka_telemetry.js --bootstrap H:P --topic T --client-id C
// Prints "librdkafka V" once connected, and errors as "error: ...".
'use strict'

const Kafka = require('node-rdkafka')

const args = {}
for (let i = 2; i < process.argv.length; i++) {
  args[process.argv[i].replace(/^--/, '')] = process.argv[++i]
}

const producer = new Kafka.Producer({
  'bootstrap.servers': args.bootstrap,
  'client.id': args['client-id'],
  'enable.metrics.push': true,
  dr_cb: true
})
producer.setPollInterval(100)
producer.on('event.error', (err) => console.log('error: ' + err))
producer.on('ready', () => {
  console.log('librdkafka ' + Kafka.librdkafkaVersion)
  const timer = setInterval(() => {
    try {
      producer.produce(args.topic, null, Buffer.from('telemetry'))
    } catch (err) {
      console.log('error: ' + err)
    }
  }, 1000)
  process.stdin.on('end', () => {
    clearInterval(timer)
    producer.flush(5000, () => producer.disconnect(() => process.exit(0)))
  })
  process.stdin.resume()
})
producer.connect()
