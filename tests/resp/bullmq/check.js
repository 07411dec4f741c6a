// BullMQ unchanged against a Redis-speaking server: a Queue, a Worker (it blocks on the
// queue's marker with BZPOPMIN, runs BullMQ's Lua scripts: cmsgpack, cjson, XADD MAXLEN ~),
// jobs added one by one and in bulk, a delayed job, a job that fails and is retried
// (attempts), a job that fails for good, the worker's completed/failed events, and the same
// events through QueueEvents (its own connection blocks on the queue's events stream with
// XREAD BLOCK from `$`), which job.waitUntilFinished waits on.
// Usage: node check.js <port>. Prints a summary line (the same on every server that runs
// BullMQ right) and PASS, exits 0; or prints why and exits 1.
"use strict";
const { Queue, QueueEvents, Worker } = require("bullmq");

const port = Number(process.argv[2]);
const connection = { host: "127.0.0.1", port, maxRetriesPerRequest: null };
const NAME = "check";
const DEADLINE_MS = 20000;

function assert(cond, what) {
  if (!cond) throw new Error("check failed: " + what);
}

const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

let trouble = null; // the worker's first error (a script or command the server refused)

async function until(what, cond) {
  const end = Date.now() + DEADLINE_MS;
  while (!(await cond())) {
    if (trouble) throw trouble;
    assert(Date.now() < end, "timed out waiting for " + what);
    await sleep(20);
  }
}

async function main() {
  const queue = new Queue(NAME, { connection });
  await queue.obliterate({ force: true });
  const seen = { completed: new Set(), failed: new Set() };
  const heard = { completed: {}, failed: {} }; // QueueEvents': job id -> result or reason
  const queueEvents = new QueueEvents(NAME, { connection });
  queueEvents.on("completed", ({ jobId, returnvalue }) => (heard.completed[jobId] = returnvalue));
  queueEvents.on("failed", ({ jobId, failedReason }) => (heard.failed[jobId] = failedReason));
  queueEvents.on("error", (err) => (trouble = trouble || err));
  await queueEvents.waitUntilReady();

  const ran = []; // job name and attempt, in the order the worker ran them
  const worker = new Worker(
    NAME,
    async (job) => {
      ran.push(job.name + "#" + job.attemptsMade);
      if (job.name === "flaky" && job.attemptsMade === 0) throw new Error("first try fails");
      if (job.name === "bad") throw new Error("always fails");
      return { doubled: job.data.n * 2 };
    },
    { connection, concurrency: 1 },
  );
  worker.on("completed", (job) => seen.completed.add(job.id));
  worker.on("failed", (job) => seen.failed.add(job.id));
  worker.on("error", (err) => (trouble = trouble || err));
  await worker.waitUntilReady();
  // the worker is blocked on its marker (BZPOPMIN), QueueEvents on the events stream (XREAD
  // BLOCK from `$`: an event before it would be missed) before the first job
  await sleep(200);

  const plain = [];
  for (let i = 0; i < 5; i++) plain.push(await queue.add("plain", { n: i }, { jobId: "p" + i }));
  const bulk = await queue.addBulk(
    [5, 6, 7].map((n) => ({ name: "bulk", data: { n }, opts: { jobId: "b" + n } })),
  );
  const added = Date.now();
  const delayed = await queue.add("delayed", { n: 10 }, { jobId: "d", delay: 300 });
  const flaky = await queue.add("flaky", { n: 20 }, { jobId: "f", attempts: 2 });
  const bad = await queue.add("bad", { n: 30 }, { jobId: "x", attempts: 1 });
  const all = [...plain, ...bulk, delayed, flaky, bad];
  // waitUntilFinished: resolved or rejected by the QueueEvents' completed/failed event
  const finished = await Promise.all([
    plain[0].waitUntilFinished(queueEvents, DEADLINE_MS),
    flaky.waitUntilFinished(queueEvents, DEADLINE_MS),
    bad.waitUntilFinished(queueEvents, DEADLINE_MS).catch((err) => "rejected: " + err.message),
  ]);

  await until("every job done", async () => {
    const counts = await queue.getJobCounts("completed", "failed");
    return counts.completed === all.length - 1 && counts.failed === 1;
  });
  // (a failed attempt is an event too: the flaky job's first one)
  await until("the events", async () => seen.completed.size === all.length - 1 && seen.failed.has("x"));
  await until(
    "QueueEvents' events",
    async () => Object.keys(heard.completed).length === all.length - 1 && "x" in heard.failed,
  );

  const results = [];
  for (const job of all) {
    const j = await queue.getJob(job.id);
    results.push([j.id, await j.getState(), j.attemptsMade, j.returnvalue, j.failedReason]);
  }
  const fifo = ran.filter((r) => r.startsWith("plain") || r.startsWith("bulk"));
  assert(fifo.join() === "plain#0,plain#0,plain#0,plain#0,plain#0,bulk#0,bulk#0,bulk#0", "FIFO");
  const d = await queue.getJob("d");
  assert(d.processedOn - added >= 290, "the delayed job ran after its delay");
  const counts = await queue.getJobCounts("waiting", "active", "delayed", "completed", "failed");
  const summary = {
    results,
    ran: ran.slice().sort(), // the retry's and the delayed job's slots depend on timing
    counts,
    events: { completed: [...seen.completed].sort(), failed: [...seen.failed].sort() },
    queueEvents: {
      completed: Object.keys(heard.completed).sort().map((id) => [id, heard.completed[id]]),
      failed: Object.keys(heard.failed).sort().map((id) => [id, heard.failed[id]]),
    },
    finished,
  };
  console.log(JSON.stringify(summary));
  await worker.close();
  await queueEvents.close();
  await queue.obliterate({ force: true });
  await queue.close();
  console.log("PASS");
}

main().then(
  () => process.exit(0),
  (err) => {
    console.log(String((err && err.stack) || err));
    process.exit(1);
  },
);
