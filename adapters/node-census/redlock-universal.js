// A hiatus lock adapter for redlock-universal (on ioredis): its createLock
// (a SimpleLock) on init's one Redis, its createRedlock (a RedLock, quorum a
// majority) on several (redis_urls, --adapter-store redis-nodes):
//   node adapters/node-census/redlock-universal.js [--careful]
// By default as its README's "acquire() / release() - Manual Control" and
// "extend()": one lock object for each lease and wait, as the README makes
// one per key and ttl, its default retryDelay (100 ms, a RedLock's 200) and
// as many retryAttempts as fit in hiatus's wait; each renew an extend(),
// whose false says the lock is gone, and each release a release(), whose
// false says the same.
// --careful holds each grant in using(), the README's "Recommended", which
// extends the lock by itself (its extensions are not reported: under a
// 1250 ms ttl it extends in a loop without pause, thousands a second), and a
// release answers not-held when its abort signal says an extension failed or
// when using()'s release found the lock gone.
"use strict";
const { serve, redisClients } = require("../node/protocol");
const { pinned, version } = require("./census");
const Redis = pinned("ioredis");
const { createLock, createRedlock, IoredisAdapter } = pinned("redlock-universal");

const careful = process.argv.includes("--careful");
let adapters;
let grants = 0;
const locks = new Map(); // `${name}/${lease}/${wait}` -> lock object
const held = new Map(); // token -> { lock, handle } or with --careful { signal, finish, done, lock }

function lockFor(req) {
  const id = `${req.lock}/${req.lease_ms}/${req.wait_ms}`;
  if (!locks.has(id)) {
    const retryDelay = adapters.length > 1 ? 200 : 100;
    const config = { key: req.lock, ttl: req.lease_ms, retryDelay, retryAttempts: Math.max(0, Math.floor(req.wait_ms / retryDelay)) };
    const lock = adapters.length > 1 ? createRedlock({ adapters, ...config }) : createLock({ adapter: adapters[0], ...config });
    // using() drops its release's answer; kept for the release request.
    const release = lock.release.bind(lock);
    lock.release = async (handle) => (lock.released = await release(handle));
    locks.set(id, lock);
  }
  return locks.get(id);
}

// refusal answers acquire()'s error by its cause (the last attempt's): the
// lock held elsewhere (a RedLock counts a node's error as a vote against
// too), or its circuit breaker open, sending nothing; any other is a Redis
// error after which the lock may be held.
function refusal(e) {
  const cause = String(e.cause && e.cause.message);
  if (/is already held|quorum not achieved/.test(cause)) return ["fail", { reason: "busy" }];
  return /Circuit breaker is (open|half-open)/.test(cause) ? ["fail", { reason: cause }] : ["info", { reason: String(e) }];
}

function hold(lock) {
  return new Promise((granted) => {
    const h = { lock };
    h.done = lock.using((signal) => {
      h.signal = signal;
      granted(h);
      return new Promise((finish) => { h.finish = finish; });
    });
    h.done.catch((error) => h.finish || granted({ error }));
  });
}

serve({
  init: async (req) => {
    adapters = redisClients(Redis, req).map((c) => new IoredisAdapter(c));
    const name = careful ? "redlock-universal-using" : "redlock-universal";
    return ["hello", { name, version: "1", library: `redlock-universal ${version("redlock-universal")}`, fencing: false, renewal: !careful }];
  },
  acquire: async (req) => {
    const lock = lockFor(req);
    let h;
    try {
      h = careful ? await hold(lock) : { lock, handle: await lock.acquire() };
      if (h.error) throw h.error;
    } catch (e) {
      return refusal(e);
    }
    const token = h.handle ? h.handle.value : `${process.pid}-${++grants}`;
    held.set(token, h);
    return ["ok", { token }];
  },
  renew: async (req) => {
    const h = held.get(req.token);
    if (!h || careful) return ["fail", { reason: "not-held" }];
    try {
      return (await h.lock.extend(h.handle, req.lease_ms)) ? ["ok"] : ["fail", { reason: "not-held" }];
    } catch (e) {
      return ["info", { reason: String(e) }];
    }
  },
  release: async (req) => {
    const h = held.get(req.token);
    held.delete(req.token);
    if (!h) return ["error", { reason: "no lock with that token" }];
    let released;
    try {
      if (careful) {
        const lost = h.signal.aborted;
        h.lock.released = undefined;
        h.finish(); // using() then releases the lock
        await h.done;
        // using() logs a release that failed and goes on: unknown.
        if (h.lock.released === undefined) return ["info", { reason: "using() could not release the lock" }];
        released = !lost && h.lock.released;
      } else {
        released = await h.lock.release(h.handle);
      }
    } catch (e) {
      return ["info", { reason: String(e) }];
    }
    return released ? ["ok"] : ["fail", { reason: "not-held" }];
  },
});
