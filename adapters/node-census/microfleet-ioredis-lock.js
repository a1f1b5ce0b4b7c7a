// A hiatus lock adapter for @microfleet/ioredis-lock (on ioredis), as its
// README shows: lock = createLock(client, { timeout, retries, delay }) with
// the run's lease as timeout, the run's retry as delay and as many retries
// as fit in hiatus's wait, then await lock.acquire(name), lock.extend(time)
// for each renew and lock.release(). A lock object holds one grant (its
// UUID is the key's value): one for each acquire.
//   node adapters/node-census/microfleet-ioredis-lock.js
// It keeps the lock under the name itself. It wraps every error in its own
// three classes, so that a Redis error is told from a refusal, or from a
// lapsed lease, only by the message: "Could not acquire lock" is busy, "had
// expired" or "has not been acquired" not-held, any other message an error
// after which it may be held.
"use strict";
const { serve, redisClients } = require("../node/protocol");
const { pinned, version, importPinned } = require("./census");
const Redis = pinned("ioredis");

let client, createLock;
let retryMs = 5;
const held = new Map(); // token -> Lock

const expired = (e) => /had expired|has not been acquired/.test(e.message);

serve({
  init: async (req) => {
    ({ createLock } = await importPinned("@microfleet/ioredis-lock")); // an ES module only
    [client] = redisClients(Redis, { ...req, redis_urls: undefined }); // the run's Redis alone: a lock of one node
    retryMs = Math.max(1, req.retry_ms || 5);
    return ["hello", { name: "microfleet-ioredis-lock", version: "1", library: `@microfleet/ioredis-lock ${version("@microfleet/ioredis-lock")}`, fencing: false, renewal: true }];
  },
  acquire: async (req) => {
    // Its delay is stretched by up to its jitter (1.2 by default).
    const lock = createLock(client, { timeout: req.lease_ms, retries: Math.floor(req.wait_ms / (retryMs * 1.1)), delay: retryMs });
    try {
      await lock.acquire(req.lock);
    } catch (e) {
      return /Could not acquire lock/.test(e.message) ? ["fail", { reason: "busy" }] : ["info", { reason: String(e) }];
    }
    held.set(lock._id, lock);
    return ["ok", { token: lock._id }];
  },
  renew: async (req) => {
    const lock = held.get(req.token);
    if (!lock) return ["fail", { reason: "not-held" }];
    try {
      await lock.extend(req.lease_ms);
      return ["ok"];
    } catch (e) {
      return expired(e) ? ["fail", { reason: "not-held" }] : ["info", { reason: String(e) }];
    }
  },
  release: async (req) => {
    const lock = held.get(req.token);
    held.delete(req.token);
    if (!lock) return ["error", { reason: "no lock with that token" }];
    try {
      await lock.release();
      return ["ok"];
    } catch (e) {
      return expired(e) ? ["fail", { reason: "not-held" }] : ["info", { reason: String(e) }];
    }
  },
});
