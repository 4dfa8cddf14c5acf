// kafkajs against one agent, for the compatibility matrix. The runner
// sets NODE_PATH to where kafkajs (and the kafkajs-snappy and kafkajs-lz4
// codecs) were installed. Prints one line per capability:
//   COMPAT {"cap":"...","status":"pass|fail|n/a","detail":"...",...}
// with the claims compatlib.py documents.
//
// usage: node kafkajs.js --bootstrap HOST:PORT --prefix P --caps c1,c2 --count N
'use strict'

const args = { count: 1000, timeoutMs: 60000 }
for (let i = 2; i < process.argv.length; i += 2) {
  const v = process.argv[i + 1]
  switch (process.argv[i]) {
    case '--bootstrap': args.bootstrap = v; break
    case '--prefix': args.prefix = v; break
    case '--caps': args.caps = v.split(',').filter(Boolean); break
    case '--count': args.count = Number(v); break
    case '--timeout-s': args.timeoutMs = Number(v) * 1000; break
    default:
      process.stderr.write(`kafkajs.js: unknown argument ${process.argv[i]}\n`)
      process.exit(2)
  }
}
if (!args.bootstrap || !args.prefix || !args.caps) {
  process.stderr.write('kafkajs.js: --bootstrap, --prefix and --caps are required\n')
  process.exit(2)
}

const { Kafka, logLevel, CompressionTypes, CompressionCodecs } = require('kafkajs')
const kafkajsVersion = require('kafkajs/package.json').version

// Codecs kafkajs does not ship: registered when their package loads,
// otherwise the cell says why not.
const codecMissing = {}
try {
  CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy')
} catch (e) {
  codecMissing.snappy = `kafkajs ships no snappy codec and kafkajs-snappy does not load: ${e.message}`
}
try {
  const LZ4 = require('kafkajs-lz4')
  CompressionCodecs[CompressionTypes.LZ4] = new LZ4().codec
} catch (e) {
  codecMissing.lz4 = `kafkajs ships no lz4 codec and kafkajs-lz4 does not load: ${e.message}`
}
codecMissing.zstd = 'kafkajs ships no zstd codec; the one codec package (@kafkajs/zstd) is a native add-on not installed here'
const codecType = { gzip: CompressionTypes.GZIP, snappy: CompressionTypes.Snappy, lz4: CompressionTypes.LZ4, zstd: CompressionTypes.ZSTD }

function emit (obj) { process.stdout.write('COMPAT ' + JSON.stringify(obj) + '\n') }
function result (cap, status, detail, claims) { emit(Object.assign({ cap, status, detail }, claims || {})) }

class CheckFailed extends Error {}
class NotApplicable extends Error {}

async function check (cap, fn) {
  try {
    const [detail, claims] = await fn()
    result(cap, 'pass', detail, claims)
    return true
  } catch (e) {
    if (e instanceof NotApplicable) {
      result(cap, 'n/a', e.message)
      return false
    }
    process.stderr.write(`${cap}: ${e.stack}\n`)
    result(cap, 'fail', `${e.name}${e.type ? ' ' + e.type : ''}: ${e.message}`)
    return false
  }
}

function messages (n, tag) {
  const out = []
  for (let i = 0; i < n; i++) {
    out.push({ key: `k${String(i % 10).padStart(2, '0')}`, value: `${tag}-${String(i).padStart(6, '0')}-${'x'.repeat(40)}` })
  }
  return out
}

// compare checks got ([{partition, offset, key, value}]) is exactly sent,
// each key in one partition, each partition in produce order.
function compare (sent, got) {
  if (got.length !== sent.length) throw new CheckFailed(`read ${got.length} records, produced ${sent.length}`)
  const byPart = new Map()
  const keyPart = new Map()
  for (const r of got) {
    if (!byPart.has(r.partition)) byPart.set(r.partition, [])
    byPart.get(r.partition).push(r)
    if (keyPart.has(r.key) && keyPart.get(r.key) !== r.partition) throw new CheckFailed(`key ${r.key} in partitions ${keyPart.get(r.key)} and ${r.partition}`)
    keyPart.set(r.key, r.partition)
  }
  const want = new Map()
  for (const m of sent) {
    if (!keyPart.has(m.key)) throw new CheckFailed(`key ${m.key} never read`)
    const p = keyPart.get(m.key)
    if (!want.has(p)) want.set(p, [])
    want.get(p).push(m.value)
  }
  for (const [p, recs] of byPart) {
    recs.sort((a, b) => Number(BigInt(a.offset) - BigInt(b.offset)))
    const vals = recs.map(r => r.value)
    const w = want.get(p) || []
    if (vals.length !== w.length || vals.some((v, i) => v !== w[i])) throw new CheckFailed(`partition ${p}: values not in produce order`)
  }
}

const kafka = new Kafka({
  clientId: 'strand-compat',
  brokers: [args.bootstrap],
  logLevel: logLevel.ERROR,
  logCreator: () => ({ level, log }) => process.stderr.write(`kafkajs ${level}: ${log.message} ${log.error || ''}\n`),
  retry: { retries: 5 }
})
const base = `${args.prefix}-kjs`
const wants = cap => args.caps.includes(cap)

function withTimeout (p, what) {
  let timer
  const t = new Promise((resolve, reject) => { timer = setTimeout(() => reject(new CheckFailed(`${what}: not done after ${args.timeoutMs} ms`)), args.timeoutMs) })
  return Promise.race([p, t]).finally(() => clearTimeout(timer))
}

async function ensureTopic (admin, topic, partitions = 3, configEntries = []) {
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: partitions, replicationFactor: 1, configEntries }] })
}

async function produce (topic, msgs, opts = {}, sendOpts = {}) {
  const producer = kafka.producer(opts)
  await producer.connect()
  try {
    // Several sends, so the producer makes several batches.
    for (let i = 0; i < msgs.length; i += 250) {
      await producer.send(Object.assign({ topic, acks: -1, messages: msgs.slice(i, i + 250) }, sendOpts))
    }
  } finally {
    await producer.disconnect()
  }
}

// startGroup runs `members` consumers of topic in group. Records are
// kept by partition and offset: a rebalance may deliver again what a
// member read but had not committed, which Kafka allows.
async function startGroup (topic, group, members, partitions, opts = {}) {
  const seen = new Map()
  const assigned = new Array(members).fill(null)
  const consumers = []
  let waiters = []
  const notify = () => { waiters = waiters.filter(w => !w()) }
  const until = (cond, what) => withTimeout(new Promise(resolve => {
    const w = () => { if (!cond()) return false; resolve(); return true }
    if (!w()) waiters.push(w)
  }), what)
  for (let i = 0; i < members; i++) {
    const c = kafka.consumer(Object.assign({ groupId: group, maxWaitTimeInMs: 100 }, opts))
    consumers.push(c)
    c.on(c.events.GROUP_JOIN, e => {
      assigned[i] = (e.payload.memberAssignment || {})[topic] || []
      notify()
    })
    await c.connect()
    await c.subscribe({ topic, fromBeginning: true })
    await c.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        seen.set(`${partition}:${message.offset}`, { partition, offset: message.offset, key: message.key.toString(), value: message.value.toString() })
        notify()
      }
    })
  }
  return {
    consumers,
    records: () => [...seen.values()],
    // stable waits until every member holds partitions and together
    // they hold each partition once: the group settled.
    stable: () => until(() => {
      if (!assigned.every(a => a && a.length > 0)) return false
      const all = assigned.flat()
      return all.length === partitions && new Set(all).size === partitions
    }, `group ${group} settling on ${partitions} partitions`),
    read: n => until(() => seen.size >= n, `group ${group} reading ${n} records`),
    close: async () => { for (const c of consumers) await c.disconnect() }
  }
}

async function readAll (topic, n, partitions, opts = {}) {
  const g = await startGroup(topic, `${topic}-reader`, 1, partitions, opts)
  try {
    await g.read(n)
    return g.records()
  } finally {
    await g.close()
  }
}

async function main () {
  emit({ client: 'kafkajs', version: kafkajsVersion })
  const admin = kafka.admin()
  await admin.connect()

  const roundtrip = (cap, topic, produceOpts, sendOpts, claims) => check(cap, async () => {
    await ensureTopic(admin, topic)
    const msgs = messages(args.count, cap)
    await produce(topic, msgs, produceOpts, sendOpts)
    compare(msgs, await readAll(topic, msgs.length, 3))
    return [`${msgs.length} records produced (acks=-1) and read back by a group consumer from the beginning`, Object.assign({ topic, produced: msgs.length }, claims)]
  })

  if (wants('produce') || wants('consume')) {
    const ok = await roundtrip('produce', base, {}, {}, {})
    if (wants('consume')) {
      if (ok) result('consume', 'pass', 'every record once, in order per partition')
      else result('consume', 'fail', 'produce failed, nothing to consume')
    }
  }

  for (const codec of ['gzip', 'snappy', 'lz4', 'zstd']) {
    if (!wants(codec)) continue
    if (codecMissing[codec]) {
      result(codec, 'n/a', codecMissing[codec])
      continue
    }
    await roundtrip(codec, `${base}-${codec}`, {}, { compression: codecType[codec] }, { codec })
  }

  if (wants('groups') || wants('offset-commit')) {
    const topic = `${base}-group`
    const group = `${base}-g`
    let g
    const groups = async () => {
      await ensureTopic(admin, topic, 4)
      // Two members settle first, so the records are read by a stable
      // group rather than across the second member's join.
      g = await startGroup(topic, group, 2, 4)
      await g.stable()
      const msgs = messages(args.count, 'group')
      await produce(topic, msgs)
      await g.read(msgs.length)
      compare(msgs, g.records())
      const listed = await admin.listGroups()
      if (!listed.groups.some(x => x.groupId === group)) throw new CheckFailed(`group ${group} not in listGroups`)
      return [`two members in ${group} shared 4 partitions and read ${msgs.length} records`, { topic, produced: msgs.length }]
    }
    const commit = async () => {
      if (!g) throw new CheckFailed('the group consumers did not start')
      // Commit what was read: the next offset of each partition.
      const next = new Map()
      for (const r of g.records()) {
        const o = BigInt(r.offset) + 1n
        if (!next.has(r.partition) || next.get(r.partition) < o) next.set(r.partition, o)
      }
      const offsets = [...next].map(([partition, offset]) => ({ topic, partition, offset: offset.toString() }))
      await g.consumers[0].commitOffsets(offsets)
      const fetched = await admin.fetchOffsets({ groupId: group, topics: [topic] })
      let total = 0n
      for (const t of fetched) for (const p of t.partitions) total += BigInt(p.offset) > 0n ? BigInt(p.offset) : 0n
      if (total !== BigInt(args.count)) throw new CheckFailed(`fetchOffsets adds up to ${total}, want ${args.count}`)
      return ['commitOffsets, then admin fetchOffsets', { topic, group, committed: args.count }]
    }
    try {
      if (wants('groups')) await check('groups', groups)
      else await groups().catch(() => {})
      if (wants('offset-commit')) await check('offset-commit', commit)
    } finally {
      if (g) await g.close()
    }
  }

  if (wants('idempotence')) {
    await roundtrip('idempotence', `${base}-idem`, { idempotent: true, maxInFlightRequests: 1 }, {}, { idempotent: true })
  }

  if (wants('transactions')) {
    await check('transactions', async () => {
      const topic = `${base}-txn`
      await ensureTopic(admin, topic)
      const producer = kafka.producer({ transactionalId: `${base}-tx`, idempotent: true, maxInFlightRequests: 1 })
      await producer.connect()
      const first = messages(args.count, 'committed')
      const aborted = messages(Math.max(1, args.count >> 1), 'aborted')
      const last = messages(Math.max(1, args.count >> 1), 'after')
      try {
        for (const [msgs, commit] of [[first, true], [aborted, false], [last, true]]) {
          const txn = await producer.transaction()
          await txn.send({ topic, acks: -1, messages: msgs })
          if (commit) await txn.commit()
          else await txn.abort()
        }
      } finally {
        await producer.disconnect()
      }
      // The aborted transaction sits between two committed ones, so
      // reading the last one means read_committed skipped it.
      const committed = first.concat(last)
      compare(committed, await readAll(topic, committed.length, 3, { readUncommitted: false }))
      return ['committed, aborted, committed transactions; read_committed sees exactly the committed records', { topic, txn_committed: committed.length }]
    })
  }

  if (wants('admin')) {
    await check('admin', async () => {
      const topic = `${base}-admin`
      await ensureTopic(admin, topic, 2, [{ name: 'retention.ms', value: '3600000' }])
      const md = await admin.fetchTopicMetadata({ topics: [topic] })
      if (md.topics[0].partitions.length !== 2) throw new CheckFailed(`${topic}: ${md.topics[0].partitions.length} partitions, want 2`)
      const cfg = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: 2, name: topic, configNames: ['retention.ms'] }] })
      const entry = cfg.resources[0].configEntries.find(e => e.configName === 'retention.ms')
      if (!entry || entry.configValue !== '3600000') throw new CheckFailed(`describeConfigs retention.ms = ${entry && entry.configValue}`)
      await admin.createPartitions({ topicPartitions: [{ topic, count: 4 }] })
      const md2 = await admin.fetchTopicMetadata({ topics: [topic] })
      if (md2.topics[0].partitions.length !== 4) throw new CheckFailed('createPartitions to 4 not visible')
      // A reassignment completes at once (no data moves on shared
      // storage); one naming a broker twice is refused as Kafka refuses
      // it. kafkajs has no call to cancel one, nor ElectLeaders.
      const node = md2.topics[0].partitions[0].leader
      await admin.alterPartitionReassignments({ topics: [{ topic, partitionAssignment: [{ partition: 3, replicas: [node] }] }] })
      let refused = null
      try {
        await admin.alterPartitionReassignments({ topics: [{ topic, partitionAssignment: [{ partition: 2, replicas: [node, node] }] }] })
      } catch (e) {
        refused = e
      }
      if (!hasErrorType(refused, 'INVALID_REPLICA_ASSIGNMENT')) throw new CheckFailed(`reassigning to a broker twice: ${refused}, want INVALID_REPLICA_ASSIGNMENT`)
      const reassigning = await admin.listPartitionReassignments({})
      if (reassigning.topics.length !== 0) throw new CheckFailed(`listPartitionReassignments: ${JSON.stringify(reassigning.topics)}, want none in progress`)
      const md3 = await admin.fetchTopicMetadata({ topics: [topic] })
      const p3 = md3.topics[0].partitions.find(p => p.partitionId === 3)
      if (!p3 || p3.replicas.length !== 1 || p3.replicas[0] !== node) throw new CheckFailed(`partition 3 replicas ${p3 && p3.replicas} after the reassignment, want [${node}]`)
      await admin.deleteTopics({ topics: [topic] })
      const left = await admin.listTopics()
      if (left.includes(topic)) throw new CheckFailed(`deleted topic ${topic} still listed`)
      return ['createTopics with a config, fetchTopicMetadata, describeConfigs, createPartitions, alterPartitionReassignments (one done, one refused), listPartitionReassignments, deleteTopics, listTopics', {}]
    })
  }
  await admin.disconnect()
}

// hasErrorType reports whether e, or an error it aggregates or wraps,
// is a Kafka error of type.
function hasErrorType (e, type) {
  if (!e) return false
  if (e.type === type) return true
  return (e.errors || []).concat(e.cause || [], e.originalError || []).some(x => hasErrorType(x, type))
}

main().then(() => process.exit(0), e => {
  process.stderr.write(`kafkajs.js: ${e.stack}\n`)
  process.exit(1)
})
