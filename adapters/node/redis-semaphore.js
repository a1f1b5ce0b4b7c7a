// A hiatus lock adapter for the npm package redis-semaphore's Mutex (on
// ioredis), with its defaults: it refreshes its own lease every 0.8 of it,
// and reports each refresh (renewing, renewed). On several Redis nodes
// (init's redis_urls, --adapter-store redis-nodes) its RedlockMutex.
//   node adapters/node/redis-semaphore.js [--fix-redlock[=validity]]
//
// --fix-redlock: the fix docs/findings.md suggests for RedlockMutex,
// applied here as the library would. Its acquire (lib/redlockMutex/
// acquire.js) waits for every node however long it takes, and counts a
// quorum of SETs however long they took. The Redlock algorithm it cites
// gives each node's SET a timeout small beside the lease (step 2:
// redsync's is 5% of it), and counts a quorum only when the attempt took
// less than the lease less the clock drift (step 3), unlocking every node
// otherwise. --fix-redlock=validity is step 3 alone (the test of it).
"use strict";
const Redis = require("ioredis");
const { Mutex, RedlockMutex } = require("redis-semaphore");
const { delIfEqualLua } = require("redis-semaphore/lib/mutex/release");
const { getQuorum } = require("redis-semaphore/lib/utils/redlock");
const { serve, version, reportRefreshes, redisClients } = require("./protocol");

const fix = process.argv.find((a) => a === "--fix-redlock" || a.startsWith("--fix-redlock="));
const fixRedlock = fix !== undefined;
const nodeTimeout = fix === "--fix-redlock"; // step 2 too

// within is p, or else 0 once ms have passed: a node that answers later
// is a vote against (the attempt does not wait for it; its answer, when
// it comes, is dropped).
function within(p, ms) {
  if (!nodeTimeout) return p;
  return Promise.race([p, new Promise((r) => setTimeout(() => r(0), ms))]);
}

// acquireValid is redis-semaphore 5.8.0's acquireRedlockMutex (the same
// loop, attempts, unlocking and retry delay) with the Redlock algorithm's
// node timeout and validity check: an attempt whose quorum came later
// than lockTimeout less the drift (node-redlock's: 1% of it and 2 ms) is
// a failed attempt.
async function acquireValid(clients, key, { identifier, lockTimeout, acquireTimeout, acquireAttemptsLimit, retryInterval }) {
  const end = Date.now() + acquireTimeout;
  const quorum = getQuorum(clients.length);
  const timeout = Math.max(10, Math.round(lockTimeout * 0.05));
  for (let attempt = 1; Date.now() < end && attempt <= acquireAttemptsLimit; attempt++) {
    const start = Date.now();
    const votes = await Promise.all(clients.map((c) =>
      within(c.set(key, identifier, "PX", lockTimeout, "NX").then((r) => (r === "OK" ? 1 : 0)).catch(() => 0), timeout)));
    const valid = lockTimeout - (Date.now() - start) - (Math.round(lockTimeout * 0.01) + 2);
    if (votes.reduce((a, b) => a + b, 0) >= quorum && valid > 0) return true;
    await Promise.all(clients.map((c) => within(delIfEqualLua(c, [key, identifier]).catch(() => 0), timeout)));
    await new Promise((r) => setTimeout(r, retryInterval));
  }
  return false;
}

let clients;
const held = new Map(); // token -> { mutex, state: { lost } }

serve({
  init: async (req) => {
    clients = redisClients(Redis, req);
    const kind = clients.length > 1 ? `RedlockMutex on ${clients.length} nodes` : "Mutex";
    const fixed = !fixRedlock || clients.length < 2 ? "" : nodeTimeout ? ", with the suggested fix (a node timeout, a validity check)" : ", with a validity check";
    const library = `redis-semaphore ${version("redis-semaphore")} ${kind}${fixed}`;
    // Its Mutex (and RedlockMutex) keeps the lock under "mutex:" and the
    // name: the key the run's record of the server is to watch.
    return ["hello", { name: "node-redis-semaphore", version: "1", library, fencing: false, renewal: false, key: `mutex:${req.lock}` }];
  },
  acquire: async (req) => {
    const state = { lost: false };
    const mutex = new (clients.length > 1 ? RedlockMutex : Mutex)(clients.length > 1 ? clients : clients[0], req.lock, {
      lockTimeout: req.lease_ms,
      acquireTimeout: Math.max(1, req.wait_ms),
      retryInterval: 5,
      // Its refresh found the lease gone: the library's only word on it.
      onLockLost: () => { state.lost = true; },
    });
    if (fixRedlock && clients.length > 1) {
      mutex._acquire = () => acquireValid(clients, mutex._key, mutex._acquireOptions);
    }
    try {
      if (!(await mutex.tryAcquire())) return ["fail", { reason: "busy" }];
    } catch (e) {
      return ["info", { reason: String(e) }];
    }
    // Its refresh timer calls this._refresh() (redis-semaphore 5.8.0, as
    // package-lock.json pins it): each is reported, renewing and renewed.
    mutex._refresh = reportRefreshes(mutex.identifier, mutex._refresh.bind(mutex));
    held.set(mutex.identifier, { mutex, state });
    return ["ok", { token: mutex.identifier }];
  },
  release: async (req) => {
    const h = held.get(req.token);
    held.delete(req.token);
    if (!h) return ["error", { reason: "no lock with that token" }];
    try {
      await h.mutex.release(); // it says nothing of a lease that lapsed
    } catch (e) {
      return ["info", { reason: String(e) }];
    }
    return h.state.lost ? ["fail", { reason: "not-held" }] : ["ok"];
  },
});
