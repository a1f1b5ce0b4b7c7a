// A hiatus lock adapter for simple-redis-mutex 3.0.0 (on node-redis),
// pinned for the orphan lock of docs/checkers.md and the fencing finding
// of docs/findings.md.
//   node adapters/node-simple-redis-mutex/main.js [--fencing] [--try [--release-says [--fix-fence]]]
// scripts/setup --adapters installs its packages (package-lock.json).
//
// By default each acquire is one lock() with the run's lease as its
// timeout, the run's retry as its polling and the request's wait as its
// failAfter, as its README has a caller who must not wait forever.
// lock() rejecting after failAfter is the library saying it could not
// have the lock: the adapter answers busy, and hiatus asks again. lock()
// gives up when its timer fires, whatever its SET NX in flight then does;
// a SET that lands after it gave up holds the key for a lease, and no one
// holds it. The release is the function lock() resolved with; the library
// does not say whether it found its key, so a release answers ok.
//
// --try acquires with tryLock instead, as the README's "Using tryLock"
// does, again every retry until the wait is over, each attempt awaited:
// no attempt is left in flight, and none overlaps another.
//
// --fencing: each grant carries the library's fencing token
// (release.fencingToken, which the README offers "to identify the order
// at which locks are acquired"), for a guard to check at the write: the
// hello says fencing, and hiatus takes no token of its own.
//
// --release-says (with --try): each grant is released by the library's
// release script with one change, that it returns 1 when it deleted the
// key (the library's returns nothing), run on the key and value tryLock
// SET (read off the client's set call): a release of a lapsed lock then
// answers not-held. The fencing finding runs both its sides so, that they
// differ in the token alone.
//
// --fix-fence (with --try --release-says): the fix docs/findings.md
// suggests, to run beside the library on the same schedule. tryLock's SET
// NX PX and its INCR of the token counter are one script, so that a token
// is taken with its grant. The key, the counter, the channel and the
// release subscriber (one duplicate of the client, subscribed before the
// first attempt) are the library's.
"use strict";
const path = require("path");
const { createRequire } = require("module");
const { serve, version } = require("../node/protocol");

const pinned = createRequire(path.join(__dirname, "package.json")); // this directory's node_modules
const { createClient } = pinned("redis");
const { lock, tryLock } = pinned("simple-redis-mutex");

const fencing = process.argv.includes("--fencing");
const tryLoop = process.argv.includes("--try");
const releaseSays = process.argv.includes("--release-says");
const fixFence = process.argv.includes("--fix-fence");
if ((releaseSays && !tryLoop) || (fixFence && !releaseSays)) {
  process.stderr.write("--release-says goes with --try, --fix-fence with --try --release-says\n");
  process.exit(2);
}
const setValues = new Map(); // key -> the value of the last SET sent on it
// lockKey is where the library keeps the lock called name (its
// getLockKey, for lock() and tryLock both).
const lockKey = (name) => `@simple-redis-mutex:lock-${name}`;
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
    if (releaseSays) {
      // tryLock's value, which its release closes over, for --release-says.
      const set = client.set.bind(client);
      client.set = (key, value, ...rest) => {
        setValues.set(key, value);
        return set(key, value, ...rest);
      };
    }
    retryMs = Math.max(1, req.retry_ms || 5);
    // The key the run's record is to watch.
    return ["hello", { name: "node-simple-redis-mutex", version: "1", library: `simple-redis-mutex ${version("simple-redis-mutex", __dirname)}`, fencing, renewal: false, key: lockKey(req.lock) }];
  },
  acquire: async (req) => {
    let release;
    try {
      release = tryLoop ? await tryFor(req) : await lock(client, req.lock, { timeout: req.lease_ms, pollingInterval: retryMs, failAfter: Math.max(1, req.wait_ms) });
    } catch (e) {
      if (/could not be acquired/.test(String(e))) return ["fail", { reason: "busy" }];
      return ["info", { reason: String(e) }];
    }
    if (!release) return ["fail", { reason: "busy" }];
    grants++;
    const token = `${process.pid}-${grants}`;
    held.set(token, release);
    return ["ok", fencing ? { token, fence: release.fencingToken } : { token }];
  },
  release: async (req) => {
    const release = held.get(req.token);
    if (!release) return ["fail", { reason: "not-held" }];
    held.delete(req.token);
    let found;
    try {
      found = await release(); // the library's says nothing (undefined)
    } catch (e) {
      return ["info", { reason: String(e) }];
    }
    return found === false ? ["fail", { reason: "not-held" }] : ["ok", {}];
  },
});

// tryFor tries the lock every retry until req's wait is over, each attempt
// awaited; the release function of its grant, or null.
async function tryFor(req) {
  const deadline = Date.now() + Math.max(1, req.wait_ms);
  for (;;) {
    const [ok, release] = fixFence ? await tryLockFenced(req.lock, req.lease_ms) : await tryLock(client, req.lock, { timeout: req.lease_ms });
    if (ok && releaseSays && !fixFence) {
      const key = lockKey(req.lock);
      return saying(key, setValues.get(key), release.fencingToken);
    }
    if (ok) return release;
    if (Date.now() >= deadline) return null;
    await new Promise((r) => setTimeout(r, retryMs));
  }
}

// The library's keys, and its release script (dist/index.js of 3.0.0)
// returning whether it deleted the key.
const FENCE_COUNTER = "@simple-redis-mutex:fencing-tokens";
const RELEASES_CHANNEL = "@simple-redis-mutex:locks-releases";
const RELEASE = `
  if redis.call("GET", KEYS[1]) == ARGV[1] then
    redis.call("DEL", KEYS[1])
    redis.call("PUBLISH", KEYS[2], string.format('{ "key": "%s", "value": "%s" }', KEYS[1], ARGV[1]))
    return 1
  end
  return 0`;
// The fix: the grant and its token in one script.
const ACQUIRE = `
  if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
    return redis.call("INCR", KEYS[2])
  end
  return 0`;

// saying is the release of the grant of key and value with token: the
// library's script, returning whether it found the key. The adapter
// calls it once (release forgets the token first).
function saying(key, value, token) {
  const release = async () => {
    const deleted = await client.eval(RELEASE, { keys: [key, RELEASES_CHANNEL], arguments: [value] });
    return deleted === 1;
  };
  release.fencingToken = token;
  return release;
}

let subscriber; // the library's: a duplicate of the client, subscribed at the first attempt

// tryLockFenced is tryLock with the fix: its token is taken with its grant.
async function tryLockFenced(name, timeout) {
  if (!subscriber) {
    subscriber = client.duplicate();
    subscriber.on("error", (e) => process.stderr.write(`redis subscriber: ${e}\n`));
    await subscriber.connect();
    await subscriber.subscribe(RELEASES_CHANNEL, () => {});
  }
  const key = lockKey(name);
  const value = String(Math.random());
  const token = await client.eval(ACQUIRE, { keys: [key, FENCE_COUNTER], arguments: [value, String(timeout)] });
  if (!token) return [false, null];
  return [true, saying(key, value, token)];
}
