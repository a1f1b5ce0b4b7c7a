// A hiatus lock adapter for the npm package node-redis-warlock, on node-redis
// v3 (its README's require("redis") of callbacks; v3 is its tests'):
//   node adapters/node-census/warlock.js [--careful]
// By default as its README's "set a lock optimistically": optimistic(name,
// ttl, maxAttempts, wait, cb) with the run's lease as ttl, the run's retry as
// wait and as many attempts as fit in hiatus's wait; the release is the
// unlock function it passes, whose result 1 says it deleted the lock (its
// README checks result == 1). optimistic() passes no lock id, and touch()
// needs one: no renewal.
// --careful takes the lock by lock(name, ttl, cb), tried again after the
// run's retry within hiatus's wait (the README's "wait a bit & retry"),
// keeps the id it passes, renews by touch(name, id, ttl, cb), whose result
// "OK" says it still held the lock, and releases by unlock(name, id, cb).
// It keeps the lock under the name and ":lock" (its makeKey). A result of
// undefined from unlock or touch is an error their script runner swallowed.
"use strict";
const { serve } = require("../node/protocol");
const { pinned, version } = require("./census");
const redis = pinned("redis3");
const Warlock = pinned("node-redis-warlock");

const careful = process.argv.includes("--careful");
let warlock;
let retryMs = 5;
let grants = 0;
const held = new Map(); // token -> id (--careful) or unlock function

const call = (f, ...args) => new Promise((resolve) => f(...args, (err, ...results) => resolve([err, ...results])));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// answer turns unlock's or touch's result into the protocol's answer.
function answer([err, result], ok) {
  if (err || result === undefined) return ["info", { reason: err ? String(err) : "no result: an error the library swallowed" }];
  return result === ok ? ["ok"] : ["fail", { reason: "not-held" }];
}

serve({
  init: async (req) => {
    const client = redis.createClient(req.redis_url);
    client.on("error", (e) => process.stderr.write(`redis: ${e}\n`));
    // node-redis v3 has no option for a name: set it on each connection.
    if (req.client_name) client.on("ready", () => client.client("setname", req.client_name));
    await new Promise((r) => client.once("ready", r));
    warlock = Warlock(client);
    retryMs = Math.max(1, req.retry_ms || 5);
    const name = careful ? "warlock-touch" : "warlock";
    return ["hello", { name, version: "1", library: `node-redis-warlock ${version("node-redis-warlock")}`, fencing: false, renewal: careful, key: `${req.lock}:lock` }];
  },
  acquire: async (req) => {
    const attempts = 1 + Math.floor(req.wait_ms / retryMs);
    if (!careful) {
      const [err, unlock] = await call(warlock.optimistic, req.lock, req.lease_ms, attempts, retryMs);
      if (err) return /unable to obtain lock/.test(err.message) ? ["fail", { reason: "busy" }] : ["info", { reason: String(err) }];
      const token = `${process.pid}-${++grants}`;
      held.set(token, unlock);
      return ["ok", { token }];
    }
    for (let i = 1; ; i++) {
      const [err, unlock, id] = await call(warlock.lock, req.lock, req.lease_ms);
      if (err) return ["info", { reason: String(err) }];
      if (typeof unlock === "function") {
        held.set(id, id);
        return ["ok", { token: id }];
      }
      if (i >= attempts) return ["fail", { reason: "busy" }];
      await sleep(retryMs);
    }
  },
  renew: async (req) => {
    if (!careful || !held.has(req.token)) return ["fail", { reason: "not-held" }];
    return answer(await call(warlock.touch, req.lock, req.token, req.lease_ms), "OK");
  },
  release: async (req) => {
    const h = held.get(req.token);
    held.delete(req.token);
    if (!h) return ["error", { reason: "no lock with that token" }];
    return answer(await (careful ? call(warlock.unlock, req.lock, h) : call(h)), 1);
  },
});
