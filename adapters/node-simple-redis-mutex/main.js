// A hiatus lock adapter for simple-redis-mutex 3.0.0's lock() (on
// node-redis), pinned for the orphan lock of docs/checkers.md: lock() with
// failAfter gives up when its timer fires, whatever its SET NX in flight
// then does; a SET that lands after it gave up holds the key for a lease,
// and no one holds it.
//   node adapters/node-simple-redis-mutex/main.js
// scripts/setup --adapters installs its packages (package-lock.json).
//
// Each acquire is one lock() with the run's lease as its timeout, the
// run's retry as its polling and the request's wait as its failAfter, as
// its README has a caller who must not wait forever. lock() rejecting
// after failAfter is the library saying it could not have the lock: the
// adapter answers busy, and hiatus asks again. The release is the
// function lock() resolved with; the library does not say whether it
// found its key, so a release answers ok.
"use strict";
const path = require("path");
const { createRequire } = require("module");
const { serve } = require("../node/protocol");

const pinned = createRequire(path.join(__dirname, "package.json")); // this directory's node_modules
const { createClient } = pinned("redis");
const { lock } = pinned("simple-redis-mutex");
const { version } = pinned("simple-redis-mutex/package.json");

let client;
let retryMs = 5;
let grants = 0;
const held = new Map(); // token -> release function

serve({
  init: async (req) => {
    // The worker's name on its connections, for the lock server's record.
    client = createClient({ url: req.redis_url, name: req.client_name || undefined });
    client.on("error", (e) => process.stderr.write(`redis: ${e}\n`));
    await client.connect();
    retryMs = Math.max(1, req.retry_ms || 5);
    // lock() keeps the lock under "@simple-redis-mutex:lock-" and the
    // name (its getLockKey): the key the run's record is to watch.
    return ["hello", { name: "node-simple-redis-mutex", version: "1", library: `simple-redis-mutex ${version}`, fencing: false, renewal: false, key: `@simple-redis-mutex:lock-${req.lock}` }];
  },
  acquire: async (req) => {
    let release;
    try {
      release = await lock(client, req.lock, { timeout: req.lease_ms, pollingInterval: retryMs, failAfter: Math.max(1, req.wait_ms) });
    } catch (e) {
      if (/could not be acquired/.test(String(e))) return ["fail", { reason: "busy" }];
      return ["info", { reason: String(e) }];
    }
    grants++;
    const token = `${process.pid}-${grants}`;
    held.set(token, release);
    return ["ok", { token }];
  },
  release: async (req) => {
    const release = held.get(req.token);
    if (!release) return ["fail", { reason: "not-held" }];
    held.delete(req.token);
    try {
      await release();
    } catch (e) {
      return ["info", { reason: String(e) }];
    }
    return ["ok", {}];
  },
});
