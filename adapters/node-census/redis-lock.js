// A hiatus lock adapter for the npm package redis-lock (1.0.0, on node-redis
// v4, which it checks for), as its README shows: lock = require("redis-lock")
// (client, retryDelay) with the run's retry as its retryDelay, done = await
// lock(name, timeout) with the run's lease as its timeout, await done().
//   node adapters/node-census/redis-lock.js
// It keeps the lock under "lock." and the name.
//
// lock() polls until it has the lock, without end, and cannot be called
// off: an acquire that is not granted within hiatus's wait answers busy and
// leaves its lock() polling, for the next acquire to wait on; a grant that
// came between them with less than half its lease left is released (done())
// and asked for again. done() resolves with its DEL's reply, or with nothing
// when its own clock says the timeout passed: a release answers not-held
// unless it deleted the key (which it does without asking whose it is).
"use strict";
const { serve } = require("../node/protocol");
const { pinned, version } = require("./census");
const { createClient } = pinned("redis");
const redisLock = pinned("redis-lock");

let client, lock;
let pending = null; // the lock() under way: { name, lease, promise, at, done }
let grants = 0;
const held = new Map(); // token -> done

function take(req) {
  const p = { name: req.lock, lease: req.lease_ms };
  p.promise = lock(req.lock, req.lease_ms).then((done) => Object.assign(p, { at: Date.now(), done }));
  return p;
}

serve({
  init: async (req) => {
    client = createClient({ url: req.redis_url, name: req.client_name || undefined });
    client.on("error", (e) => process.stderr.write(`redis: ${e}\n`));
    await client.connect();
    lock = redisLock(client, Math.max(1, req.retry_ms || 50));
    return ["hello", { name: "redis-lock", version: "1", library: `redis-lock ${version("redis-lock")}`, fencing: false, renewal: false, key: `lock.${req.lock}` }];
  },
  acquire: async (req) => {
    const deadline = Date.now() + req.wait_ms;
    for (;;) {
      if (pending && (pending.lease !== req.lease_ms || pending.name !== req.lock)) {
        pending.promise.then((p) => p.done()).catch(() => {}); // asked for another lease: given up
        pending = null;
      }
      if (!pending) pending = take(req);
      let timer;
      const wait = new Promise((r) => { timer = setTimeout(r, Math.max(0, deadline - Date.now())); });
      const p = await Promise.race([pending.promise, wait]);
      clearTimeout(timer);
      if (!p) return ["fail", { reason: "busy" }];
      pending = null;
      const left = p.at + p.lease - Date.now();
      if (left >= p.lease / 2) {
        const token = `${process.pid}-${++grants}`;
        held.set(token, p.done);
        return ["ok", left < p.lease ? { token, lease_ms: Math.floor(left) } : { token }];
      }
      try {
        await p.done();
      } catch (e) {
        return ["info", { reason: `releasing a grant that came late: ${e}` }];
      }
    }
  },
  release: async (req) => {
    const done = held.get(req.token);
    held.delete(req.token);
    if (!done) return ["error", { reason: "no lock with that token" }];
    try {
      return (await done()) === 1 ? ["ok"] : ["fail", { reason: "not-held" }];
    } catch (e) {
      return ["info", { reason: String(e) }];
    }
  },
});
