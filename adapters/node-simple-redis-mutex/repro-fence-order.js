// A reproduction, without hiatus, of simple-redis-mutex 3.0.0's fencing
// token taken apart from its grant (docs/findings.md, "simple-redis-mutex's
// fencing token"): tryLock SETs the key NX PX, and only after that reply
// INCRs the token counter. A client whose SET reply comes later than its
// lease (a slow link, a GC pause) is granted, its key expires, another
// client takes the lock and its token, and the first then takes a larger
// token than the holder's: a guard that keeps the largest token seen
// turns the rightful holder away and lets the stale one write.
//
//   node adapters/node-simple-redis-mutex/repro-fence-order.js REDIS_PORT [TRIES]
//
// Client A reaches Redis through a proxy that holds the server's replies
// back DELAY ms (its requests go at once); client B connects directly.
"use strict";
const net = require("net");
const path = require("path");
const { createRequire } = require("module");

const pinned = createRequire(path.join(__dirname, "package.json"));
const { createClient } = pinned("redis");
const { tryLock } = pinned("simple-redis-mutex");

const LEASE = 200;
const DELAY = 400;
const port = Number(process.argv[2]);
const tries = Number(process.argv[3] || 3);

// delayProxy forwards to port, holding the server's bytes back while
// slow() says so.
function delayProxy(slow) {
  const server = net.createServer((c) => {
    const s = net.connect(port, "127.0.0.1");
    c.on("data", (d) => s.write(d));
    s.on("data", (d) => (slow() ? setTimeout(() => c.write(d), DELAY) : c.write(d)));
    c.on("error", () => s.destroy());
    s.on("error", () => c.destroy());
    c.on("close", () => s.destroy());
    s.on("close", () => c.destroy());
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

async function once(a, b, setSlow, name) {
  const t0 = Date.now();
  const at = () => `${Date.now() - t0} ms`;
  setSlow(true);
  const first = tryLock(a, name, { timeout: LEASE }).then(([ok, release]) => ({ ok, release, at: at() }));
  // A's SET is granted at once; its reply, and so its INCR, come DELAY
  // later. B asks after A's lease ran out.
  await new Promise((r) => setTimeout(r, LEASE + 50));
  const [bOK, bRelease] = await tryLock(b, name, { timeout: LEASE });
  const bAt = at();
  const aGot = await first;
  setSlow(false);
  console.log(`A: SET at 0 ms (lease ${LEASE} ms), tryLock returned ${aGot.ok} at ${aGot.at}, fencing token ${aGot.release.fencingToken}`);
  console.log(`B: tryLock returned ${bOK} at ${bAt}, fencing token ${bRelease.fencingToken}`);
  const inverted = aGot.ok && bOK && aGot.release.fencingToken > bRelease.fencingToken;
  console.log(inverted
    ? "  inverted: B holds the lock, A's lease is gone, and A's token is the larger"
    : "  not inverted");
  await bRelease();
  await aGot.release();
  return inverted;
}

async function main() {
  let slow = false;
  const proxy = await delayProxy(() => slow);
  const a = createClient({ url: `redis://127.0.0.1:${proxy.address().port}` });
  const b = createClient({ url: `redis://127.0.0.1:${port}` });
  await a.connect();
  await b.connect();
  // The library's one release subscriber (a duplicate of the first client
  // it is given) starts with the first tryLock: start it, and each
  // client's script cache, before anything is timed.
  for (const c of [a, b]) (await tryLock(c, "warm-up", { timeout: LEASE }))[1]();
  let inverted = 0;
  for (let i = 0; i < tries; i++) {
    if (await once(a, b, (s) => { slow = s; }, `repro-fence-order-${process.pid}-${i}`)) inverted++;
  }
  console.log(`${inverted} of ${tries} tries inverted`);
  await a.quit();
  await b.quit();
  proxy.close();
  process.exit(inverted === tries ? 1 : 0);
}

main().catch((e) => {
  console.error(e);
  process.exit(2);
});
