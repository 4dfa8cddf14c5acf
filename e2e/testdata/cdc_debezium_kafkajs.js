// A consumer written for Debezium, as its documentation describes the
// PostgreSQL connector's change events, run against Strand's captured
// topics by TestCDCAcceptance (e2e/cdc_test.go). It knows nothing of
// Strand: it reads each topic from the beginning in a consumer group
// (kafkajs's default isolation, read_committed), decodes JsonConverter's
// {"schema", "payload"} envelope, decodes values by their Connect
// schema (org.apache.kafka.connect.data.Decimal as base64 two's
// complement with the scale in the parameters,
// io.debezium.data.VariableScaleDecimal, io.debezium.time.ZonedTimestamp
// as text), and applies payload.op (c, r, u: the row is payload.after;
// d: the row named by the key is gone), ignoring tombstones, which
// follow a delete. It checks what Debezium documents of each event as
// it goes and prints one JSON line: the tables as it reproduced them,
// counts by op, and the errors it found.
//
//   node cdc_debezium_kafkajs.js --bootstrap HOST:PORT --expect TOPIC=N[,TOPIC=N...] [--timeout-ms MS]
//
// --expect names each topic and how many records (tombstones included)
// to read from it before stopping.
const { Kafka, logLevel, CompressionTypes, CompressionCodecs } = require('kafkajs')

// kafkajs ships gzip only; a Debezium deployment's consumers add the
// codecs its producers use (franz-go's default is snappy).
CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy')
CompressionCodecs[CompressionTypes.LZ4] = new (require('kafkajs-lz4'))().codec

const maxErrors = 50

function parseArgs (argv) {
  const out = { timeoutMs: 120000 }
  for (let i = 2; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1]]
    if (k === '--bootstrap') out.bootstrap = v
    else if (k === '--expect') out.expect = Object.fromEntries(v.split(',').map(s => { const j = s.lastIndexOf('='); return [s.slice(0, j), Number(s.slice(j + 1))] }))
    else if (k === '--timeout-ms') out.timeoutMs = Number(v)
    else throw new Error('unknown argument ' + k)
  }
  if (!out.bootstrap || !out.expect) throw new Error('--bootstrap and --expect are required')
  return out
}

// decimalOf decodes Connect's Decimal: the unscaled value, big-endian
// two's complement, base64 in JSON.
function decimalOf (b64, scale) {
  const bytes = Buffer.from(b64, 'base64')
  let n = 0n
  for (const b of bytes) n = (n << 8n) | BigInt(b)
  if (bytes.length > 0 && (bytes[0] & 0x80)) n -= 1n << BigInt(8 * bytes.length)
  const neg = n < 0n
  let digits = (neg ? -n : n).toString()
  if (scale > 0) {
    digits = digits.padStart(scale + 1, '0')
    digits = digits.slice(0, digits.length - scale) + '.' + digits.slice(digits.length - scale)
  }
  return (neg ? '-' : '') + digits
}

// valueOf decodes one field's JSON value by its Connect schema.
function valueOf (schema, v) {
  if (v === null || v === undefined) return null
  switch (schema.name) {
    case 'org.apache.kafka.connect.data.Decimal':
      return typeof v === 'string' ? decimalOf(v, Number((schema.parameters || {}).scale || 0)) : String(v)
    case 'io.debezium.data.VariableScaleDecimal':
      return decimalOf(v.value, v.scale)
  }
  if (schema.type === 'bytes' && typeof v === 'string') return v
  return v
}

// rowOf decodes payload.before or payload.after with its struct schema
// (or as it is when the topic carries no schemas).
function rowOf (structSchema, row) {
  if (row === null || row === undefined) return null
  if (!structSchema) return row
  const out = {}
  for (const f of structSchema.fields) {
    if (f.field in row) out[f.field] = valueOf(f, row[f.field])
  }
  for (const k of Object.keys(row)) {
    if (!(k in out)) out[k] = row[k]
  }
  return out
}

function fieldSchema (schema, name) {
  if (!schema || !schema.fields) return null
  return schema.fields.find(f => f.field === name) || null
}

async function main () {
  const args = parseArgs(process.argv)
  const errors = []
  const error = (msg) => { if (errors.length < maxErrors) errors.push(msg) }
  const tables = {} // table -> Map(key JSON -> row)
  const counts = { c: 0, u: 0, d: 0, r: 0, tombstones: 0 }
  const read = {} // topic -> records read
  const lastDelete = {} // topic/partition -> key of a delete awaiting its tombstone
  const kafka = new Kafka({ clientId: 'cdc-debezium-consumer', brokers: [args.bootstrap], logLevel: process.env.CDC_KAFKAJS_LOG === 'debug' ? logLevel.DEBUG : logLevel.ERROR })
  const consumer = kafka.consumer({ groupId: 'cdc-debezium-' + process.pid + '-' + Date.now() })
  const topics = Object.keys(args.expect)
  let finish
  const done = new Promise(resolve => { finish = resolve })
  const check = () => { if (topics.every(t => (read[t] || 0) >= args.expect[t])) finish('done') }
  check()
  // A consumer that crashed (and will not restart) ends the run, with
  // the reason, rather than waiting for the timeout.
  consumer.on(consumer.events.CRASH, e => {
    if (!e.payload.restart) {
      error(`consumer crashed: ${e.payload.error}`)
      finish('crash')
    }
  })
  await consumer.connect()
  await consumer.subscribe({ topics, fromBeginning: true })
  await consumer.run({
    eachMessage: async ({ topic, partition, message }) => {
      read[topic] = (read[topic] || 0) + 1
      const where = `${topic}/${partition}@${message.offset}`
      const tp = topic + '/' + partition
      if (message.key === null) { error(`${where}: no key`); return }
      let key
      try {
        key = JSON.parse(message.key.toString())
      } catch (e) { error(`${where}: key is not JSON: ${e.message}`); return }
      const keyPayload = (key && key.schema && 'payload' in key) ? key.payload : key
      const keyText = JSON.stringify(keyPayload)
      if (message.value === null) {
        // A tombstone: Debezium writes one after each delete, so log
        // compaction can drop the key. Nothing to apply.
        counts.tombstones++
        if (lastDelete[tp] !== keyText) error(`${where}: tombstone for ${keyText} not after its delete`)
        delete lastDelete[tp]
        check()
        return
      }
      if (lastDelete[tp] !== undefined) {
        error(`${where}: the delete of ${lastDelete[tp]} before it has no tombstone`)
        delete lastDelete[tp]
      }
      let value
      try {
        value = JSON.parse(message.value.toString())
      } catch (e) { error(`${where}: value is not JSON: ${e.message}`); return }
      const schema = value.schema || null
      const payload = (schema && 'payload' in value) ? value.payload : value
      if (!schema) error(`${where}: no schema (JsonConverter's schemas.enable is Debezium's default)`)
      const op = payload.op
      const src = payload.source || {}
      if (!['c', 'u', 'd', 'r'].includes(op)) { error(`${where}: op ${JSON.stringify(op)}`); return }
      counts[op]++
      if (src.connector !== 'postgresql') error(`${where}: source.connector ${JSON.stringify(src.connector)}`)
      for (const f of ['name', 'db', 'schema', 'table']) {
        if (typeof src[f] !== 'string' || src[f] === '') error(`${where}: source.${f} ${JSON.stringify(src[f])}`)
      }
      for (const f of ['ts_ms', 'lsn']) {
        if (typeof src[f] !== 'number') error(`${where}: source.${f} ${JSON.stringify(src[f])}`)
      }
      if (op !== 'r' && typeof src.txId !== 'number') error(`${where}: source.txId ${JSON.stringify(src.txId)}`)
      if (op === 'r' && !['true', 'first', 'last', 'first_in_data_collection', 'last_in_data_collection', 'incremental'].includes(src.snapshot)) {
        error(`${where}: snapshot read with source.snapshot ${JSON.stringify(src.snapshot)}`)
      }
      if (op !== 'r' && src.snapshot !== undefined && src.snapshot !== 'false' && src.snapshot !== null) {
        error(`${where}: op ${op} with source.snapshot ${JSON.stringify(src.snapshot)}`)
      }
      if (typeof payload.ts_ms !== 'number') error(`${where}: ts_ms ${JSON.stringify(payload.ts_ms)}`)
      const before = rowOf(fieldSchema(schema, 'before'), payload.before)
      const after = rowOf(fieldSchema(schema, 'after'), payload.after)
      const table = src.table
      if (!tables[table]) tables[table] = new Map()
      const rows = tables[table]
      switch (op) {
        case 'c':
        case 'r':
          if (before !== null) error(`${where}: op ${op} with a before`)
          if (after === null) { error(`${where}: op ${op} without an after`); return }
          rows.set(keyText, after)
          break
        case 'u':
          if (after === null) { error(`${where}: update without an after`); return }
          rows.set(keyText, after)
          break
        case 'd':
          if (after !== null) error(`${where}: delete with an after`)
          if (before === null) error(`${where}: delete without a before (REPLICA IDENTITY DEFAULT keeps the key)`)
          if (!rows.has(keyText)) error(`${where}: delete of ${keyText}, not present`)
          rows.delete(keyText)
          lastDelete[tp] = keyText
          break
      }
      check()
    }
  })
  const timer = setTimeout(() => finish('timeout'), args.timeoutMs)
  const how = await done
  clearTimeout(timer)
  await consumer.disconnect()
  if (how === 'timeout') {
    error(`timed out after ${args.timeoutMs} ms: read ${JSON.stringify(read)}, expected ${JSON.stringify(args.expect)}`)
  }
  for (const t of topics) {
    if ((read[t] || 0) > args.expect[t]) error(`${t}: read ${read[t]} records, more than the ${args.expect[t]} expected`)
  }
  const out = {}
  for (const [t, rows] of Object.entries(tables)) out[t] = [...rows.values()]
  process.stdout.write(JSON.stringify({ tables: out, counts, read, errors }) + '\n')
}

main().catch(e => {
  process.stdout.write(JSON.stringify({ error: String(e && e.stack || e) }) + '\n')
  process.exit(1)
})
