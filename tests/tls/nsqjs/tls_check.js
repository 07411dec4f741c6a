#!/usr/bin/env node
// nsqjs 0.13.0 over TLS (verified against a test CA), snappy, deflate, TLS+snappy and
// TLS+deflate: per mode a Writer publishes N messages (half one by one, half in MPUBs of 50)
// and a Reader consumes them; every body must arrive exactly once, and every connection must
// really have run the upgrades (counted on NSQDConnection's startTLS/startSnappy/startDeflate).
//
//   node tls_check.js --nsqd 127.0.0.1:4150 --ca ca.pem [--modes tls,snappy] [-n 1000]
//
// Prints RESULT PASS|FAIL <mode> <seconds> <detail> per mode; exit status 0 when all passed.
// Every wait is bounded.
'use strict'

const fs = require('fs')
const tls = require('tls')
const nsq = require('nsqjs')

const upgrades = {tls: 0, snappy: 0, deflate: 0}
const proto = nsq.NSQDConnection.prototype
for (const [method, key] of [['startTLS', 'tls'], ['startSnappy', 'snappy'], ['startDeflate', 'deflate']]) {
  const original = proto[method]
  proto[method] = function (...args) {
    upgrades[key]++
    return original.apply(this, args)
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

function withTimeout(promise, ms, what) {
  let timer
  const timeout = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms}ms`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

async function waitFor(cond, ms) {
  const deadline = Date.now() + ms
  while (!cond()) {
    if (Date.now() > deadline) return false
    await sleep(10)
  }
  return true
}

function parseArgs(argv) {
  const args = {modes: 'tls,snappy,deflate,tls+snappy,tls+deflate', n: 1000}
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i]
    const v = argv[++i]
    if (k === '--nsqd') args.nsqd = v
    else if (k === '--ca') args.ca = v
    else if (k === '--cert') args.cert = v
    else if (k === '--key') args.key = v
    else if (k === '--modes') args.modes = v
    else if (k === '-n') args.n = Number(v)
    else throw new Error(`unknown argument ${k}`)
  }
  if (!args.nsqd || !args.ca) throw new Error('--nsqd and --ca are required')
  return args
}

function options(mode, args) {
  const parts = new Set(mode.split('+'))
  const o = {}
  if (parts.has('tls')) {
    o.tls = true
    o.tlsVerification = true
    o.ca = fs.readFileSync(args.ca)
    if (args.cert) {
      o.cert = fs.readFileSync(args.cert)
      o.key = fs.readFileSync(args.key)
    }
  }
  if (parts.has('snappy')) o.snappy = true
  if (parts.has('deflate')) {
    o.deflate = true
    o.deflateLevel = 6
  }
  return o
}

async function exchange(mode, args, run) {
  const [host, port] = [args.nsqd.slice(0, args.nsqd.lastIndexOf(':')), Number(args.nsqd.slice(args.nsqd.lastIndexOf(':') + 1))]
  const topic = `nsqjs_tls_${run}_${mode.replace('+', '_')}`
  const opts = options(mode, args)
  const before = {...upgrades}
  const bodies = []
  for (let i = 0; i < args.n; i++) bodies.push(`${mode}-${i}`)
  const closers = []
  try {
    const w = new nsq.Writer(host, port, opts)
    const ready = new Promise((resolve, reject) => {
      w.once('ready', resolve)
      w.once('error', reject)
    })
    w.on('error', () => {})
    w.connect()
    closers.push(() => w.close())
    await withTimeout(ready, 5000, 'Writer connect')
    if (opts.tls && !(w.conn.conn instanceof tls.TLSSocket)) return [false, 'Writer socket is not TLS']
    const publish = (msgs) =>
      withTimeout(new Promise((resolve, reject) => w.publish(topic, msgs, (err) => (err ? reject(err) : resolve()))), 5000, 'publish')
    const half = Math.floor(args.n / 2)
    for (let i = 0; i < half; i++) await publish(bodies[i])
    for (let i = half; i < args.n; i += 50) await publish(bodies.slice(i, i + 50))

    const seen = new Map()
    const r = new nsq.Reader(topic, 'ch', {nsqdTCPAddresses: [args.nsqd], maxInFlight: 100, lookupdPollInterval: 60, ...opts})
    r.on('error', () => {})
    r.on('message', (msg) => {
      const body = msg.body.toString()
      seen.set(body, (seen.get(body) || 0) + 1)
      msg.finish()
    })
    r.connect()
    closers.push(() => r.close())
    await waitFor(() => seen.size >= args.n, 20000)
    await sleep(100)
    let missing = 0
    for (const b of bodies) if (!seen.has(b)) missing++
    let dupes = 0
    for (const c of seen.values()) if (c > 1) dupes++
    const want = mode.split('+')
    for (const key of want) {
      const n = upgrades[key] - before[key]
      if (n < 2) return [false, `${key} upgrade ran ${n} times, want 2 (writer and reader)`]
    }
    for (const key of Object.keys(upgrades)) {
      if (!want.includes(key) && upgrades[key] !== before[key]) return [false, `unexpected ${key} upgrade`]
    }
    const ok = missing === 0 && dupes === 0 && seen.size === args.n
    return [ok, `${seen.size} received, missing=${missing} duplicates=${dupes}, upgrades ${want.join('+')}`]
  } finally {
    for (const c of closers.reverse()) {
      try {
        c()
      } catch (err) {
        // already closed
      }
    }
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2))
  const run = String(Date.now() % 1000000000)
  let failed = 0
  for (const mode of args.modes.split(',')) {
    const start = Date.now()
    let ok
    let detail
    try {
      ;[ok, detail] = await withTimeout(exchange(mode, args, run), 40000, mode)
    } catch (err) {
      ok = false
      detail = `${err && err.message}`
    }
    if (!ok) failed++
    console.log(`RESULT ${ok ? 'PASS' : 'FAIL'} ${mode} ${((Date.now() - start) / 1000).toFixed(2)} ${detail}`)
  }
  process.exit(failed ? 1 : 0)
}

main().catch((err) => {
  console.error(err)
  process.exit(2)
})
