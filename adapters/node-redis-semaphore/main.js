// A hiatus lock adapter for redis-semaphore's Mutex (on ioredis), pinned at
// two versions for the finding "redis-semaphore refresh re-acquires an
// expired lock" (docs/findings.md): v5.3.0/ holds 5.3.0, whose refresh
// script SETs the key again when it has expired, and says refreshed;
// v5.3.1/ holds the fix, whose refresh says the lock was lost.
//   node adapters/node-redis-semaphore/main.js v5.3.0   (or v5.3.1)
// scripts/setup --adapters installs both and writes bin/redis-semaphore-v5.3.*.
//
// Each grant is a Mutex with the library's defaults: its own refresh every
// 0.8 lease, and onLockLost. It takes renew requests (hello renewal: true),
// so that --extend-before-write can ask before each write: a renew is the
// library's refresh of the grant, as its README has a handler refresh a
// lock it holds by identifier (a Mutex with externallyAcquiredIdentifier,
// whose acquire "will do refresh ... if ... lock was expired - exception
// will be thrown"), and it answers ok only when that refresh said yes and
// onLockLost has not fired.
"use strict";
const path = require("path");
const { createRequire } = require("module");
const { serve } = require("../node/protocol");

if (!/^v\d/.test(process.argv[2] || "")) {
  process.stderr.write("usage: node main.js VERSION-DIR (v5.3.0 or v5.3.1: the pinned redis-semaphore)\n");
  process.exit(2);
}
const dir = path.join(__dirname, process.argv[2]);
const pinned = createRequire(path.join(dir, "package.json")); // that version's node_modules
const Redis = pinned("ioredis");
const { Mutex } = pinned("redis-semaphore");
const { version } = pinned("redis-semaphore/package.json");

let client;
const held = new Map(); // token -> { mutex, state }

serve({
  init: async (req) => {
    client = new Redis(req.redis_url, { maxRetriesPerRequest: 1, connectionName: req.client_name || undefined });
    // Its Mutex keeps the lock under "mutex:" and the name (5.3.0, 5.3.1).
    return ["hello", { name: "node-redis-semaphore-pinned", version: "1", library: `redis-semaphore ${version}`, fencing: false, renewal: true, key: `mutex:${req.lock}` }];
  },
  acquire: async (req) => {
    const state = { lost: false };
    const mutex = new Mutex(client, req.lock, {
      lockTimeout: req.lease_ms,
      acquireTimeout: Math.max(1, req.wait_ms),
      retryInterval: 5,
      // Its refresh found the lease gone: the library's word on it.
      onLockLost: () => { state.lost = true; },
    });
    try {
      if (!(await mutex.tryAcquire())) return ["fail", { reason: "busy" }];
    } catch (e) {
      return ["info", { reason: String(e) }];
    }
    held.set(mutex.identifier, { mutex, state });
    return ["ok", { token: mutex.identifier }];
  },
  renew: async (req) => {
    const h = held.get(req.token);
    if (!h) return ["fail", { reason: "not-held" }];
    if (h.state.lost || !h.mutex.isAcquired) return ["fail", { reason: "not-held" }];
    // The library's refresh, now: a Mutex of the same identifier, which
    // refreshes instead of acquiring, and refreshes only once.
    const now = new Mutex(client, req.lock, {
      lockTimeout: req.lease_ms,
      acquireAttemptsLimit: 1,
      refreshInterval: 0,
      externallyAcquiredIdentifier: req.token,
      onLockLost: () => {},
    });
    try {
      if (!(await now.tryAcquire())) {
        // Lost, as its own refresh would have found: it stops refreshing,
        // and its release says so. It cannot tell expired from taken.
        h.state.lost = true;
        h.mutex.stopRefresh();
        return ["fail", { reason: "not-held" }];
      }
    } catch (e) {
      return ["info", { reason: String(e) }];
    }
    return h.state.lost ? ["fail", { reason: "not-held" }] : ["ok"];
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
