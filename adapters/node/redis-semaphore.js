// A hiatus lock adapter for the npm package redis-semaphore's Mutex (on
// ioredis), with its defaults: it refreshes its own lease every 0.8 of it,
// and reports each refresh (renewing, renewed). On several Redis nodes
// (init's redis_urls, --adapter-store redis-nodes) its RedlockMutex.
//   node adapters/node/redis-semaphore.js
"use strict";
const Redis = require("ioredis");
const { Mutex, RedlockMutex } = require("redis-semaphore");
const { serve, version, reportRefreshes } = require("./protocol");

let clients;
const held = new Map(); // token -> { mutex, lost }

serve({
  init: async (req) => {
    clients = (req.redis_urls || [req.redis_url]).map(
      (url) => new Redis(url, { maxRetriesPerRequest: 1, connectionName: req.client_name || undefined }));
    const kind = clients.length > 1 ? `RedlockMutex on ${clients.length} nodes` : "Mutex";
    const library = `redis-semaphore ${version("redis-semaphore")} ${kind}`;
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
