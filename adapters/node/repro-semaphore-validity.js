// A lead of issue 36, shown without hiatus: redis-semaphore's RedlockMutex
// (5.8.0, as package-lock.json pins it) takes no account of the time its
// acquire took. Its attempt SETs the key on every node and waits for all
// of them (Promise.all): with one node of three stopped (SIGSTOP), the
// attempt waits for it, and says acquired when it answers, however long
// after its keys on the other two expired. A second client that tries in
// between takes those two. Both are then told they hold the lock.
//   node adapters/node/repro-semaphore-validity.js PORT PORT PORT
// (three throwaway redis-servers on this machine; the third is stopped
// 900 ms and continued).
"use strict";
const Redis = require("ioredis");
const { RedlockMutex } = require("redis-semaphore");

const ports = process.argv.slice(2).map(Number);
const lease = 500;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

(async () => {
  const info = await new Redis(ports[2]).info("server");
  const pid = Number(/process_id:(\d+)/.exec(info)[1]);
  const a = ports.map((p) => new Redis(p)), b = ports.map((p) => new Redis(p));
  await Promise.all([...a, ...b].map((c) => c.ping()));
  const t0 = Date.now();
  const since = () => `${Date.now() - t0} ms`;
  const opts = { lockTimeout: lease, acquireTimeout: 5000, retryInterval: 10 };
  const ma = new RedlockMutex(a, "validity", { ...opts, onLockLost: () => console.log(`A: lock lost at ${since()}`) });
  const mb = new RedlockMutex(b, "validity", { ...opts, onLockLost: () => console.log(`B: lock lost at ${since()}`) });
  process.kill(pid, "SIGSTOP");
  const pa = ma.tryAcquire().then((ok) => console.log(`A: tryAcquire said ${ok} at ${since()} (asked at 0 ms, lease ${lease} ms)`));
  await sleep(700);
  const pb = mb.tryAcquire().then((ok) => console.log(`B: tryAcquire said ${ok} at ${since()} (asked at 700 ms)`));
  await sleep(200);
  process.kill(pid, "SIGCONT");
  await Promise.all([pa, pb]);
  for (const [i, c] of a.entries()) {
    const v = await c.get("mutex:validity");
    console.log(`node ${i}: ${v === ma.identifier ? "A's" : v === mb.identifier ? "B's" : v} key, ${await c.pttl("mutex:validity")} ms left`);
  }
  await sleep(lease);
  process.exit(0);
})();
