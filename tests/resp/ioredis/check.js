// ioredis unchanged against a Redis-speaking server: connect (ready check reads INFO),
// the seed's reliable-queue pattern with blocking consumers, FIFO blocked clients, pipelining,
// expiry. Usage: node check.js <port>. Prints PASS and exits 0, or prints why and exits 1.
"use strict";
const Redis = require("ioredis");

const port = Number(process.argv[2]);
const opts = { host: "127.0.0.1", port, maxRetriesPerRequest: 1, lazyConnect: true };

function assert(cond, what) {
  if (!cond) throw new Error("check failed: " + what);
}
const eq = (a, b) => JSON.stringify(a) === JSON.stringify(b);

async function main() {
  const r = new Redis(opts);
  await r.connect();
  await r.flushall();
  assert((await r.ping()) === "PONG", "PING");
  await r.client("SETNAME", "node-check");
  assert((await r.client("GETNAME")) === "node-check", "CLIENT GETNAME");

  // reliable queue: BLMOVE to processing, LREM to ack, three consumers
  const consumers = [0, 1, 2].map(() => new Redis(opts));
  const done = [];
  const work = consumers.map(async (c) => {
    for (;;) {
      const job = await c.blmove("jobs", "processing", "RIGHT", "LEFT", 2);
      if (job === null || job === "stop") {
        if (job === "stop") await c.lrem("processing", 1, job);
        return;
      }
      done.push(job);
      assert((await c.lrem("processing", 1, job)) === 1, "ack " + job);
    }
  });
  const jobs = Array.from({ length: 150 }, (_, i) => "job-" + i);
  for (let i = 0; i < jobs.length; i += 10) await r.lpush("jobs", ...jobs.slice(i, i + 10));
  await r.lpush("jobs", "stop", "stop", "stop");
  await Promise.all(work);
  assert(eq(done.slice().sort(), jobs.slice().sort()), "every job processed once");
  assert((await r.exists("jobs", "processing")) === 0, "queues empty");

  // FIFO among blocked clients; one push serves several
  const waiters = [new Redis(opts), new Redis(opts)];
  const first = waiters[0].blpop("q", 5);
  await new Promise((res) => setTimeout(res, 100));
  const second = waiters[1].blpop("q", 5);
  await new Promise((res) => setTimeout(res, 100));
  assert((await r.rpush("q", "a", "b")) === 2, "RPUSH length");
  assert(eq(await first, ["q", "a"]), "first waiter gets the first element");
  assert(eq(await second, ["q", "b"]), "second waiter the next");
  assert((await waiters[0].blpop("q", 0.1)) === null, "timeout gives null");

  // pipelining and expiry
  const res = await r.pipeline().rpush("p", "1", "2").lpop("p", 2).llen("p").exec();
  assert(eq(res.map((x) => x[1]), [2, ["1", "2"], 0]), "pipeline " + JSON.stringify(res));
  await r.set("s", "v", "PX", 100);
  await r.hset("h", "f", "v");
  await r.pexpire("h", 100);
  await new Promise((res) => setTimeout(res, 300));
  assert((await r.exists("s", "h")) === 0, "expired");
  try {
    await r.lpush("s2", "x");
    await r.get("s2");
    throw new Error("GET on a list did not fail");
  } catch (err) {
    assert(String(err.message).startsWith("WRONGTYPE"), "WRONGTYPE: " + err.message);
  }
  for (const c of [r, ...consumers, ...waiters]) c.disconnect();
  console.log("PASS");
}

main().then(
  () => process.exit(0),
  (err) => {
    console.log("FAIL " + (err && err.stack ? err.stack : err));
    process.exit(1);
  },
);
