// A hiatus lock adapter for the npm package redlock (v5, on ioredis), on the
// Redis nodes init names (redis_urls: one, or a Redlock's several with
// --adapter-store redis-nodes): node adapters/node/redlock.js
"use strict";
const Redis = require("ioredis");
const Redlock = require("redlock").default;
const { ExecutionError, ResourceLockedError } = require("redlock");
const { serve, version } = require("./protocol");

let redlock;
const held = new Map(); // token -> Lock
const retryDelay = 5;

// refused says whether redlock's error is only other holders' locks (a
// ResourceLockedError each vote against), not a Redis error that leaves
// the outcome unknown.
async function refused(e) {
  if (!(e instanceof ExecutionError)) return false;
  for (const attempt of e.attempts) {
    for (const err of (await attempt).votesAgainst.values()) {
      if (!(err instanceof ResourceLockedError)) return false;
    }
  }
  return true;
}

serve({
  init: async (req) => {
    const clients = (req.redis_urls || [req.redis_url]).map(
      (url) => new Redis(url, { maxRetriesPerRequest: 1, connectionName: req.client_name || undefined }));
    redlock = new Redlock(clients, { retryDelay, retryJitter: 0 });
    return ["hello", { name: "node-redlock", version: "1", library: `redlock ${version("redlock")}`, fencing: false, renewal: true }];
  },
  acquire: async (req) => {
    try {
      const retryCount = Math.max(0, Math.floor(req.wait_ms / retryDelay));
      const lock = await redlock.acquire([req.lock], req.lease_ms, { retryCount });
      held.set(lock.value, lock);
      return ["ok", { token: lock.value }];
    } catch (e) {
      return (await refused(e)) ? ["fail", { reason: "busy" }] : ["info", { reason: String(e) }];
    }
  },
  renew: async (req) => {
    const lock = held.get(req.token);
    if (!lock) return ["fail", { reason: "not-held" }];
    try {
      held.set(req.token, await lock.extend(req.lease_ms));
      return ["ok"];
    } catch (e) {
      return (await refused(e)) ? ["fail", { reason: "not-held" }] : ["info", { reason: String(e) }];
    }
  },
  release: async (req) => {
    const lock = held.get(req.token);
    held.delete(req.token);
    if (!lock) return ["error", { reason: "no lock with that token" }];
    try {
      await redlock.release(lock, { retryCount: 0 });
      return ["ok"];
    } catch (e) {
      // redlock cannot tell an expired lease from one another holder took.
      return (await refused(e)) ? ["fail", { reason: "not-held" }] : ["info", { reason: String(e) }];
    }
  },
});
