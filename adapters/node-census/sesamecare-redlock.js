// A hiatus lock adapter for @sesamecare-oss/redlock, node-redlock rewritten
// in TypeScript for ioredis 5, on the Redis nodes init names (redis_urls:
// one, or a Redlock's several with --adapter-store redis-nodes):
//   node adapters/node-census/sesamecare-redlock.js [--careful]
// By default as its README's "acquired and released directly": the README's
// settings (driftFactor 0.01, retryCount 10, retryDelay 200, retryJitter
// 200), as many acquire retries as fit in hiatus's wait (as
// adapters/node/redlock.js --readme), lock.extend for each renew and
// lock.release(), which retries a failed release 10 times (some 2 s).
// --careful holds each grant in redlock.using(), the README's first usage:
// the library extends the lock by itself (each extension reported, renewing
// and renewed), and a release answers not-held when its abort signal says an
// extension failed, or when the lock's own expiration (its start + duration
// - drift) has passed, which a careful routine checks before it writes.
"use strict";
const { serve, reportRefreshes, redisClients } = require("../node/protocol");
const { pinned, version } = require("./census");
const Redis = pinned("ioredis");
const { Redlock, ExecutionError, ResourceLockedError } = pinned("@sesamecare-oss/redlock");

const careful = process.argv.includes("--careful");
const retryDelay = 200;
let redlock;
const held = new Map(); // token -> Lock, or with --careful { signal, context, finish, done }

// refused says whether redlock's error is only other holders' locks (a
// ResourceLockedError each vote against, or none: its own expiration), not
// a Redis error that leaves the outcome unknown.
async function refused(e) {
  if (!(e instanceof ExecutionError)) return false;
  for (const attempt of e.attempts) {
    for (const err of (await attempt).votesAgainst.values()) {
      if (!(err instanceof ResourceLockedError)) return false;
    }
  }
  return true;
}

// hold runs one redlock.using(), resolving with the grant once the routine
// runs, which holds the lock until it is told to finish.
function hold(req, settings) {
  return new Promise((granted) => {
    const h = {};
    h.done = redlock.using([req.lock], req.lease_ms, settings, (signal, context) => {
      Object.assign(h, { signal, context });
      granted(h);
      return new Promise((finish) => { h.finish = finish; });
    });
    h.done.catch((error) => h.finish || granted({ error }));
  });
}

serve({
  init: async (req) => {
    redlock = new Redlock(redisClients(Redis, req), { driftFactor: 0.01, retryCount: 10, retryDelay, retryJitter: 200, automaticExtensionThreshold: 500 });
    if (careful) {
      // The one call each of using()'s extensions makes.
      const extend = redlock.extend.bind(redlock);
      redlock.extend = async (lock, duration, settings) => {
        let extended, refusal;
        await reportRefreshes(lock.value, async () => {
          try {
            extended = await extend(lock, duration, settings);
            return true;
          } catch (e) {
            if (!(await refused(e))) throw e;
            refusal = e;
            return false;
          }
        })();
        if (refusal) throw refusal;
        return extended;
      };
    }
    const name = careful ? "sesamecare-redlock-using" : "sesamecare-redlock";
    return ["hello", { name, version: "1", library: `@sesamecare-oss/redlock ${version("@sesamecare-oss/redlock")}`, fencing: false, renewal: !careful }];
  },
  acquire: async (req) => {
    const retryCount = Math.max(0, Math.floor(req.wait_ms / retryDelay));
    if (careful) {
      // using() refuses a threshold within 100 ms of the duration.
      const h = await hold(req, { retryCount, automaticExtensionThreshold: Math.min(500, Math.floor(req.lease_ms / 3)) });
      if (h.error) return (await refused(h.error)) ? ["fail", { reason: "busy" }] : ["info", { reason: String(h.error) }];
      held.set(h.context.lock.value, h);
      return ["ok", { token: h.context.lock.value }];
    }
    try {
      const lock = await redlock.acquire([req.lock], req.lease_ms, { retryCount });
      held.set(lock.value, lock);
      return ["ok", { token: lock.value }];
    } catch (e) {
      return (await refused(e)) ? ["fail", { reason: "busy" }] : ["info", { reason: String(e) }];
    }
  },
  renew: async (req) => {
    const lock = held.get(req.token);
    if (!lock || careful) return ["fail", { reason: "not-held" }];
    try {
      held.set(req.token, await lock.extend(req.lease_ms)); // a new Lock, as its README says
      return ["ok"];
    } catch (e) {
      return (await refused(e)) ? ["fail", { reason: "not-held" }] : ["info", { reason: String(e) }];
    }
  },
  release: async (req) => {
    const h = held.get(req.token);
    held.delete(req.token);
    if (!h) return ["error", { reason: "no lock with that token" }];
    let lost = false;
    try {
      if (careful) {
        lost = h.signal.aborted || h.context.lock.expiration <= Date.now();
        h.finish(); // using() then releases the lock
        await h.done;
      } else {
        await h.release();
      }
    } catch (e) {
      return (await refused(e)) ? ["fail", { reason: "not-held" }] : ["info", { reason: String(e) }];
    }
    return lost ? ["fail", { reason: "not-held" }] : ["ok"];
  },
});
