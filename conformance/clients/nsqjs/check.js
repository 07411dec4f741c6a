#!/usr/bin/env node
// Runs the client conformance checks against one nsqd with the nsqjs Reader/Writer.
//
//   node check.js --nsqd 127.0.0.1:4150 [--check all|NAME[,NAME...]] [--list]
//
// Each check prints one line to stdout:
//
//   RESULT PASS|FAIL <check> <seconds> <detail>
//
// The exit status is 0 when every check passed, 1 when one failed and 2 for a usage error.
// Every wait is bounded: a check that overruns its limit is reported as failed. The checks
// and their pass criteria are the same as go-nsq's in ../gonsq/main.go.
'use strict'

const nsq = require('nsqjs')
const {performance} = require('perf_hooks')

const CLIENT = 'nsqjs'
// How late a timer-driven event (message timeout, REQ delay, DPUB delay) may be seen:
// nsqd v1.3.0 only scans channels it learnt about at its last 5s refresh.
const MAX_LAG_MS = 5500
const RUN_ID = String(Date.now() % 1000000000)

// ---------------------------------------------------------------------------------------------
// helpers

const now = () => performance.now()
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const secs = (ms) => `${(ms / 1000).toFixed(3)}s`

function log(...args) {
  process.stderr.write(`nsqjs ${new Date().toISOString()} ${args.join(' ')}\n`)
}

function withTimeout(promise, ms, what) {
  let timer
  const timeout = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${secs(ms)}`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

async function waitFor(cond, ms) {
  const deadline = now() + ms
  while (!cond()) {
    if (now() > deadline) return false
    await sleep(10)
  }
  return true
}

function splitAddr(addr) {
  const i = addr.lastIndexOf(':')
  return [addr.slice(0, i), Number(addr.slice(i + 1))]
}

let NSQD = '127.0.0.1:4150'

// Resources a check opened, closed when it ends (whatever the outcome).
class Scope {
  constructor() {
    this.closers = []
  }

  async writer() {
    const [host, port] = splitAddr(NSQD)
    const w = new nsq.Writer(host, port)
    const ready = new Promise((resolve, reject) => {
      w.once('ready', resolve)
      w.once('error', reject)
    })
    w.on('error', (err) => log('writer error:', err && err.message))
    w.connect()
    this.closers.push(() => w.close())
    await withTimeout(ready, 5000, 'Writer connect')
    return w
  }

  // A Reader on topic/channel calling onMessage(msg, receivedAtMs); resolves once subscribed.
  async reader(topic, channel, options, onMessage) {
    const r = new nsq.Reader(topic, channel, {
      nsqdTCPAddresses: [NSQD],
      lookupdPollInterval: 60,
      ...options,
    })
    const ready = new Promise((resolve, reject) => {
      r.once('ready', resolve)
      r.once('error', reject)
    })
    r.on('error', (err) => log(`reader ${topic}/${channel} error:`, err && err.message))
    r.on('message', (msg) => onMessage(msg, now()))
    r.connect()
    this.closers.push(() => r.close())
    await withTimeout(ready, 5000, `Reader ${topic}/${channel} subscribe`)
    return r
  }

  close() {
    for (const c of this.closers.reverse()) {
      try {
        c()
      } catch (err) {
        log('close:', err.message)
      }
    }
    this.closers = []
  }
}

function publish(w, topic, msgs) {
  return withTimeout(
    new Promise((resolve, reject) => {
      w.publish(topic, msgs, (err) => (err ? reject(err) : resolve()))
    }),
    5000,
    'publish'
  )
}

function deferPublish(w, topic, msg, ms) {
  return withTimeout(
    new Promise((resolve, reject) => {
      w.deferPublish(topic, msg, ms, (err) => (err ? reject(err) : resolve()))
    }),
    5000,
    'deferPublish'
  )
}

function bodies(prefix, from, to) {
  const out = []
  for (let i = from; i < to; i++) out.push(`${prefix}${i}`)
  return out
}

// Records which bodies one consumer received (FIN on receipt; probes are ignored).
class Tally {
  constructor(expected) {
    this.expected = new Set(expected)
    this.seen = new Map()
    this.probes = 0
    this.dupes = 0
    this.badAttempts = 0
  }

  handle(msg) {
    const body = msg.body.toString()
    if (body.startsWith('probe-')) {
      this.probes++
    } else {
      const n = (this.seen.get(body) || 0) + 1
      this.seen.set(body, n)
      if (n > 1) this.dupes++
      if (msg.attempts !== 1) this.badAttempts++
    }
    msg.finish()
  }

  get unique() {
    return this.seen.size
  }

  summary() {
    let missing = 0
    let unexpected = 0
    for (const b of this.expected) if (!this.seen.has(b)) missing++
    for (const b of this.seen.keys()) if (!this.expected.has(b)) unexpected++
    const ok = missing === 0 && unexpected === 0 && this.dupes === 0 && this.badAttempts === 0
    return [
      ok,
      `received=${this.seen.size} missing=${missing} unexpected=${unexpected} ` +
        `duplicates=${this.dupes} attempts!=1:${this.badAttempts}`,
    ]
  }
}

async function publishProbesUntil(w, topic, ready) {
  const deadline = now() + 5000
  for (let i = 0; !ready(); i++) {
    if (now() > deadline) throw new Error('consumers not all subscribed after 5s of probes')
    await publish(w, topic, `probe-${i}`)
    await waitFor(ready, 50)
  }
}

// Deliveries of one message as seen by a handler.
class Deliveries {
  constructor() {
    this.list = []
  }

  push(msg, at) {
    this.list.push({id: msg.id, attempts: msg.attempts, at, body: msg.body.toString()})
  }

  async wait(n, ms) {
    await waitFor(() => this.list.length >= n, ms)
    return this.list.slice(0, n)
  }

  sameMessage() {
    return this.list.every((d) => d.id === this.list[0].id && d.body === this.list[0].body)
  }

  attempts() {
    return this.list.map((d) => d.attempts).join(',')
  }
}

// ---------------------------------------------------------------------------------------------
// checks: each takes (topic, scope) and returns [ok, detail]

async function checkPublishConsume(topic, scope) {
  const n = 2000
  const w = await scope.writer()
  const all = bodies('m-', 0, n)
  for (const b of all.slice(0, n / 2)) await publish(w, topic, b)
  for (let i = n / 2; i < n; i += 100) await publish(w, topic, all.slice(i, i + 100))
  const t = new Tally(all)
  await scope.reader(topic, 'c', {maxInFlight: 64}, (m) => t.handle(m))
  await waitFor(() => t.unique >= n, 25000)
  await sleep(200)
  return t.summary()
}

async function checkRequeue(topic, scope) {
  const w = await scope.writer()
  const ds = new Deliveries()
  await scope.reader(topic, 'c', {maxInFlight: 2}, (m, at) => {
    ds.push(m, at)
    if (m.attempts === 1) m.requeue(0, false)
    else if (m.attempts === 2) m.requeue(700, false)
    else m.finish()
  })
  await publish(w, topic, 'requeue-me')
  const got = await ds.wait(3, MAX_LAG_MS + 3000)
  if (got.length < 3) return [false, `got ${got.length} deliveries (${ds.attempts()}), want 3`]
  await sleep(500)
  const g1 = got[1].at - got[0].at
  const g2 = got[2].at - got[1].at
  const detail = `attempts ${ds.attempts()}; REQ 0 -> ${secs(g1)}; REQ 700ms -> ${secs(g2)}`
  if (ds.list.length > 3) return [false, `${detail}; delivered again after FIN`]
  if (!ds.sameMessage()) return [false, `${detail}; redelivered a different message id/body`]
  if (ds.attempts() !== '1,2,3') return [false, `${detail}; attempts should be 1,2,3`]
  if (g1 > 600) return [false, `${detail}; REQ 0 redelivery took too long (>0.6s)`]
  if (g2 < 650 || g2 > MAX_LAG_MS + 700) {
    return [false, `${detail}; REQ 700ms redelivery outside [0.65s, ${secs(MAX_LAG_MS + 700)}]`]
  }
  return [true, detail]
}

async function checkTimeout(topic, scope) {
  const w = await scope.writer()
  const ds = new Deliveries()
  // maxInFlight 1: nsqd flushes each message at once (no output-buffer delay)
  await scope.reader(topic, 'c', {maxInFlight: 1, messageTimeout: 1000}, (m, at) => {
    ds.push(m, at)
    if (m.attempts !== 1) m.finish() // attempt 1: never answered, let it time out
  })
  await publish(w, topic, 'let-me-time-out')
  const got = await ds.wait(2, MAX_LAG_MS + 3000)
  if (got.length < 2) {
    return [false, `got ${got.length} deliveries, want 2 (no redelivery after timeout)`]
  }
  const gap = got[1].at - got[0].at
  const detail = `attempts ${ds.attempts()}; redelivered after ${secs(gap)} (msg_timeout 1s)`
  if (!ds.sameMessage()) return [false, `${detail}; redelivered a different message id/body`]
  if (ds.attempts() !== '1,2') return [false, `${detail}; attempts should be 1,2`]
  if (gap < 900 || gap > MAX_LAG_MS + 1000) {
    return [false, `${detail}; redelivery outside [0.9s, ${secs(MAX_LAG_MS + 1000)}]`]
  }
  return [true, detail]
}

async function checkTouch(topic, scope) {
  const w = await scope.writer()
  const ds = new Deliveries()
  let finishedAt = null
  await scope.reader(topic, 'c', {maxInFlight: 1, messageTimeout: 1000}, (m, at) => {
    ds.push(m, at)
    if (m.attempts !== 1) {
      m.finish()
      return
    }
    ;(async () => {
      for (let i = 0; i < 6; i++) {
        await sleep(400)
        m.touch()
      }
      m.finish()
      finishedAt = now()
    })()
  })
  await publish(w, topic, 'keep-me-alive')
  const first = await ds.wait(1, 5000)
  if (first.length === 0) return [false, 'message never delivered']
  await waitFor(() => finishedAt !== null || ds.list.length > 1, 5000)
  if (ds.list.length > 1) {
    const d = ds.list[1]
    return [
      false,
      `redelivered after ${secs(d.at - first[0].at)} despite TOUCH every 400ms ` +
        `(attempts=${d.attempts})`,
    ]
  }
  if (finishedAt === null) return [false, 'touch loop did not finish']
  const held = finishedAt - first[0].at
  await sleep(1300)
  if (ds.list.length > 1) {
    return [
      false,
      `redelivered ${secs(ds.list[1].at - first[0].at)} after first delivery ` +
        `(held ${secs(held)} with 6 TOUCH)`,
    ]
  }
  return [true, `held ${secs(held)} with 6 TOUCH (msg_timeout 1s), FIN, no redelivery`]
}

async function checkBackoff(topic, scope) {
  const w = await scope.writer()
  const ds = new Deliveries()
  // nsqjs's backoff timer (ported from pynsq): first interval = max * (0.25/10 + 0.75/250),
  // so maxBackoffDuration 36s gives a ~1.008s first backoff.
  await scope.reader(topic, 'c', {maxInFlight: 1, maxBackoffDuration: 36}, (m, at) => {
    ds.push(m, at)
    if (m.attempts === 1) m.requeue(0, false)
    else if (m.attempts === 2) m.requeue(0, true)
    else m.finish()
  })
  await publish(w, topic, 'back-off')
  const got = await ds.wait(3, 8000)
  if (got.length < 3) return [false, `got ${got.length} deliveries (${ds.attempts()}), want 3`]
  const g1 = got[1].at - got[0].at
  const g2 = got[2].at - got[1].at
  const detail = `no-backoff REQ -> ${secs(g1)}; backoff REQ (1.008s) -> ${secs(g2)}`
  if (!ds.sameMessage()) return [false, `${detail}; redelivered a different message id/body`]
  if (ds.attempts() !== '1,2,3') {
    return [false, `${detail}; attempts ${ds.attempts()} should be 1,2,3`]
  }
  if (g1 > 600) return [false, `${detail}; requeue without backoff took >0.6s`]
  if (g2 < 800) return [false, `${detail}; delivered during backoff (RDY 0 not honoured?)`]
  if (g2 > 4000) {
    return [false, `${detail}; not delivered after backoff ended (RDY 1 not honoured?)`]
  }
  return [true, detail]
}

async function checkFanout(topic, scope) {
  const n = 1000
  const w = await scope.writer()
  const all = bodies('m-', 0, n)
  const ta = new Tally(all)
  const tb = new Tally(all)
  await scope.reader(topic, 'a', {maxInFlight: 32}, (m) => ta.handle(m))
  await scope.reader(topic, 'b', {maxInFlight: 32}, (m) => tb.handle(m))
  await publishProbesUntil(w, topic, () => ta.probes > 0 && tb.probes > 0)
  for (let i = 0; i < n; i += 100) await publish(w, topic, all.slice(i, i + 100))
  await waitFor(() => ta.unique >= n && tb.unique >= n, 20000)
  await sleep(200)
  const [okA, sa] = ta.summary()
  const [okB, sb] = tb.summary()
  return [okA && okB, `channel a: ${sa}; channel b: ${sb}`]
}

async function checkSplit(topic, scope) {
  const n = 1000
  const w = await scope.writer()
  const all = bodies('m-', 0, n)
  const t1 = new Tally(all)
  const t2 = new Tally(all)
  await scope.reader(topic, 'c', {maxInFlight: 16}, (m) => t1.handle(m))
  await scope.reader(topic, 'c', {maxInFlight: 16}, (m) => t2.handle(m))
  await publishProbesUntil(w, topic, () => t1.probes > 0 && t2.probes > 0)
  for (let i = 0; i < n; i += 100) await publish(w, topic, all.slice(i, i + 100))
  const union = () => {
    const u = new Set([...t1.seen.keys(), ...t2.seen.keys()])
    let both = 0
    for (const b of t1.seen.keys()) if (t2.seen.has(b)) both++
    return [u.size, both]
  }
  await waitFor(() => union()[0] >= n, 20000)
  await sleep(200)
  const [u, both] = union()
  const dupes = t1.dupes + t2.dupes
  const detail =
    `union=${u}/${n} consumer1=${t1.unique} consumer2=${t2.unique} ` +
    `on-both=${both} duplicates=${dupes}`
  if (u !== n) return [false, `${detail}; messages missing`]
  if (both !== 0 || dupes !== 0) return [false, `${detail}; a message was delivered more than once`]
  if (t1.unique < n / 10 || t2.unique < n / 10) {
    return [false, `${detail}; one consumer got under 10%`]
  }
  return [true, detail]
}

async function checkDeferred(topic, scope) {
  const delay = 1500
  const w = await scope.writer()
  const ds = new Deliveries()
  await scope.reader(topic, 'c', {maxInFlight: 4}, (m, at) => {
    ds.push(m, at)
    m.finish()
  })
  const t0 = now()
  await deferPublish(w, topic, ['later'], delay) // nsqjs 0.13 wants an array here
  await publish(w, topic, 'now')
  await ds.wait(2, MAX_LAG_MS + 4000)
  const got = {}
  for (const d of ds.list) got[d.body] = d.at - t0
  const order = ds.list.map((d) => d.body).join(',')
  const detail =
    `order [${order}]; now after ${secs(got.now || 0)}, later after ${secs(got.later || 0)} ` +
    `(delay ${secs(delay)})`
  if (got.now === undefined || got.later === undefined) return [false, `${detail}; message missing`]
  if (got.now > 1000) return [false, `${detail}; plain publish took >1s`]
  if (got.later < delay - 50) return [false, `${detail}; deferred message arrived early`]
  if (got.later > delay + MAX_LAG_MS) {
    return [false, `${detail}; deferred message arrived over ${secs(MAX_LAG_MS)} late`]
  }
  await sleep(200)
  if (ds.list.length > 2) return [false, `${detail}; unexpected extra delivery`]
  return [true, detail]
}

const CHECKS = [
  ['publish_consume', 40000, checkPublishConsume],
  ['requeue', 20000, checkRequeue],
  ['timeout', 20000, checkTimeout],
  ['touch', 15000, checkTouch],
  ['backoff', 15000, checkBackoff],
  ['fanout', 30000, checkFanout],
  ['split', 30000, checkSplit],
  ['deferred', 20000, checkDeferred],
]

// ---------------------------------------------------------------------------------------------
// main

async function runCheck([name, limit, fn]) {
  const topic = `${CLIENT}_${name}_${RUN_ID}`
  const scope = new Scope()
  const start = now()
  let ok
  let detail
  try {
    ;[ok, detail] = await withTimeout(fn(topic, scope), limit, `check ${name}`)
  } catch (err) {
    ok = false
    detail = `error: ${err && err.message ? err.message : err}`
  } finally {
    scope.close()
  }
  const line = `RESULT ${ok ? 'PASS' : 'FAIL'} ${name} ${((now() - start) / 1000).toFixed(3)} `
  process.stdout.write(line + String(detail).replace(/\n/g, ' ') + '\n')
  return ok
}

function parseArgs(argv) {
  const args = {nsqd: NSQD, check: 'all', list: false}
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i].replace(/^--?/, '')
    let value
    if (a.includes('=')) [a, value] = [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)]
    if (a === 'list') {
      args.list = true
      continue
    }
    if (!(a in args)) throw new Error(`unknown flag ${argv[i]}`)
    if (value === undefined) value = argv[++i]
    if (value === undefined) throw new Error(`flag ${argv[i - 1]} needs a value`)
    args[a] = value
  }
  return args
}

async function main() {
  let args
  try {
    args = parseArgs(process.argv.slice(2))
  } catch (err) {
    process.stderr.write(`${err.message}\nusage: node check.js --nsqd HOST:PORT [--check all|NAME,...]\n`)
    return 2
  }
  if (args.list) {
    for (const [name] of CHECKS) process.stdout.write(`${name}\n`)
    return 0
  }
  NSQD = args.nsqd
  let selected = CHECKS
  if (args.check !== 'all') {
    const names = args.check.split(',').map((s) => s.trim())
    const unknown = names.filter((n) => !CHECKS.some(([name]) => name === n))
    if (unknown.length) {
      process.stderr.write(`unknown check(s): ${unknown.join(', ')}\n`)
      return 2
    }
    selected = CHECKS.filter(([name]) => names.includes(name))
  }
  let failed = 0
  for (const check of selected) {
    if (!(await runCheck(check))) failed++
  }
  process.stdout.write(`${CLIENT}: ${selected.length - failed} passed, ${failed} failed\n`)
  return failed ? 1 : 0
}

process.on('unhandledRejection', (err) => log('unhandled rejection:', err && err.message))

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`${err && err.stack ? err.stack : err}\n`)
    process.exit(1)
  }
)
