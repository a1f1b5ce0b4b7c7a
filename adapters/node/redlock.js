// A hiatus lock adapter for the npm package redlock (v5, on ioredis), on the
// Redis nodes init names (redis_urls: one, or a Redlock's several with
// --adapter-store redis-nodes):
//   node adapters/node/redlock.js [--readme] [--retry-outside]
// By default it retries every 5 ms, without jitter, for as long as hiatus
// asks it to wait. --readme uses the settings its README shows
// (retryDelay 200, retryJitter 200, driftFactor 0.01), retrying as many
// times as fit in the wait. --retry-outside leaves redlock no retries
// (retryCount 0) and calls acquire again after the same delay, which
// releases a failed attempt's partial locks before the next, as the Redlock
// algorithm asks after each failed attempt.
"use strict";
const Redis = require("ioredis");
const Redlock = require("redlock").default;
const { ExecutionError, ResourceLockedError } = require("redlock");
const { serve, version, redisClients } = require("./protocol");

let redlock;
const held = new Map(); // token -> Lock
const readme = process.argv.includes("--readme");
const outside = process.argv.includes("--retry-outside");
const retryDelay = readme ? 200 : 5;
const retryJitter = readme ? 200 : 0;
const driftFactor = 0.01; // redlock's default, and its README's

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

// take makes one acquire of redlock's, with retryCount retries of its own.
async function take(req, retryCount) {
  try {
    const lock = await redlock.acquire([req.lock], req.lease_ms, { retryCount });
    held.set(lock.value, lock);
    return ["ok", { token: lock.value }];
  } catch (e) {
    return (await refused(e)) ? ["fail", { reason: "busy" }] : ["info", { reason: String(e) }];
  }
}

serve({
  init: async (req) => {
    redlock = new Redlock(redisClients(Redis, req), { driftFactor, retryDelay, retryJitter });
    const usage = [readme && "README settings", outside && "retries outside"].filter(Boolean).join(", ");
    const library = `redlock ${version("redlock")}${usage ? ` (${usage})` : ""}`;
    return ["hello", { name: "node-redlock", version: "1", library, fencing: false, renewal: true }];
  },
  acquire: async (req) => {
    const retryCount = Math.max(0, Math.floor(req.wait_ms / retryDelay));
    if (!outside) return take(req, retryCount);
    // As many attempts as redlock's own retries would make, but none
    // begun after the wait: a busy answer then, and hiatus asks again.
    const deadline = Date.now() + req.wait_ms;
    for (let i = 0; ; i++) {
      const a = await take(req, 0);
      const delay = Math.max(0, retryDelay + Math.floor((Math.random() * 2 - 1) * retryJitter));
      if (a[0] !== "fail" || i >= retryCount || Date.now() + delay > deadline) return a;
      await new Promise((r) => setTimeout(r, delay));
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
