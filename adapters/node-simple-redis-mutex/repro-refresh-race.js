// A reproduction, without hiatus, of simple-redis-mutex 3.0.0's
// refreshTimeout (dist/index.js:147-153): a GET of the key, compared with
// the holder's value, then a separate PEXPIRE, and nothing returned. If
// the holder's link stalls after the GET, its key can expire and another
// client take the lock before the PEXPIRE lands: the PEXPIRE then sets the
// NEW holder's lease to the old holder's timeout, and the old holder is
// told nothing. The contrast sends, on the same schedule and the same
// stall, a compare-and-PEXPIRE script in place of the bare PEXPIRE.
//
//   node adapters/node-simple-redis-mutex/repro-refresh-race.js [B_TIMEOUT_MS]
//
// Starts its own redis-server. Client A reaches it through a proxy that,
// once armed, lets A's next GET through and then holds whatever A sends
// for STALL ms (a slow link); B and C connect directly.
//
// Exit: 1 when the library's late PEXPIRE changed B's key (or B and C both
// held the lock) and the script's did neither; 0 when the library's did
// neither (or the script's did too: not a clean repro); 2 on a setup error
// (redis-server missing or dead, a module missing, the schedule not met,
// an interrupt). To count runs: for i in $(seq 5); do node <this> >/dev/null; echo -n "$? "; done
"use strict";
process.on("uncaughtException", (e) => { console.error(e); process.exit(2); }); // e.g. a module missing
const net = require("net");
const path = require("path");
const { spawn } = require("child_process");
const { createRequire } = require("module");

const pinned = createRequire(path.join(__dirname, "package.json"));
const { createClient } = pinned("redis");
const { tryLock } = pinned("simple-redis-mutex");

const A_LEASE = 300; // A's timeout, as tryLock's option
const B_LEASE = Number(process.argv[2] || 5000); // B's (and C's): the README lets each caller pick its own
const REFRESH_AT = 200; // A refreshes with 100 ms of its lease left
const STALL = 600; // A's link stalls this long after the GET: its key expires meanwhile
const SCRIPT = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) else return 0 end`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const lockKey = (name) => `@simple-redis-mutex:lock-${name}`; // the library's getLockKey

let redis; // the throwaway redis-server, killed on every exit path
process.on("exit", () => redis && redis.kill("SIGKILL"));
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => process.exit(2));

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer().once("error", reject);
    s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
}

// stallProxy forwards to port. After arm(), the first GET command any
// connection sends goes through; what that connection sends in the next
// STALL ms is held, in order, and delivered when the stall ends.
function stallProxy(port) {
  let armed = false, flushed = 0; // flushed: when the held bytes were last let go
  const server = net.createServer((c) => {
    const s = net.connect(port, "127.0.0.1");
    let until = 0, queue = [];
    c.on("data", (d) => {
      if (Date.now() < until) {
        if (queue.push(d) === 1) setTimeout(() => { flushed = Date.now(); queue.forEach((q) => s.write(q)); queue = []; }, until - Date.now());
        return;
      }
      s.write(d);
      // node-redis sends GET as a RESP array whose first bulk string is "GET".
      if (armed && /^\*\d+\r\n\$3\r\nGET\r\n/.test(d.toString("latin1"))) { armed = false; until = Date.now() + STALL; }
    });
    s.on("data", (d) => c.write(d));
    for (const [x, y] of [[c, s], [s, c]]) { x.on("error", () => y.destroy()); x.on("close", () => y.destroy()); }
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ server, arm: () => { armed = true; }, flushed: () => flushed })));
}

// race runs one round on lock name: A takes it, refreshes at REFRESH_AT
// through the stall (refresh is the library's, or the script), B takes
// the lock once A's key expired, and C tries once A's late command landed.
async function race({ a, b, c, proxy }, name, label, refresh) {
  const key = lockKey(name);
  console.log(`--- ${label}`);
  const t0 = Date.now();
  const at = () => Date.now() - t0;
  const [aOK, aRelease] = await tryLock(a, name, { timeout: A_LEASE });
  const aToken = await b.get(key);
  await sleep(REFRESH_AT - at());
  proxy.arm();
  const refreshing = refresh(aRelease, key, aToken).then(
    (v) => ({ said: `returned ${v === undefined ? "undefined" : JSON.stringify(v)}`, at: at() }),
    (e) => ({ said: `threw ${e.message}`, at: at() }));
  let bOK = false, bSent;
  while (!bOK && at() < REFRESH_AT + STALL) { bSent = at(); [bOK] = await tryLock(b, name, { timeout: B_LEASE }); if (!bOK) await sleep(5); }
  if (!bOK) throw new Error("setup: B never took the lock during A's stall");
  const bAt = at(), bToken = await b.get(key);
  await sleep(REFRESH_AT + STALL - 100 - at());
  const before = await b.pTTL(key), beforeAt = at();
  const ref = await refreshing;
  const after = await b.pTTL(key), afterAt = at(), holds = await b.get(key);
  // A PTTL answered before the proxy let A's bytes go ran before them at Redis.
  const flushedAt = proxy.flushed() - t0;
  if (beforeAt >= flushedAt) throw new Error(`setup: the first PTTL (${beforeAt} ms) was not answered before A's stall ended (${flushedAt} ms)`);
  console.log(`A: tryLock ${aOK} at 0 ms (timeout ${A_LEASE}), value ${aToken}; refresh called at ${REFRESH_AT} ms, its GET went at once, the rest of it stalled ${STALL} ms`);
  console.log(`B: tryLock true at ${bAt} ms (timeout ${B_LEASE}), value ${bToken}`);
  console.log(`B's key PTTL: ${before} ms read at ${beforeAt} ms; A's stalled bytes let go at ${flushedAt} ms; PTTL ${after} ms read at ${afterAt} ms`);
  console.log(`A's refresh ${ref.said} at ${ref.at} ms; the key holds ${holds === bToken ? "B's value" : `${holds}, not B's value`}`);
  // Untouched, the PTTL falls by the time between the reads (give or take a few ms of reply latency).
  const changed = before > 0 && Math.abs(after - (before - (afterAt - beforeAt))) > 25;
  // C tries for 500 ms. B's own lease (as B knows it) ends B_LEASE after it sent its SET.
  const bEnds = bSent + B_LEASE;
  let cOK = false, cAt;
  const cFrom = at();
  while (!cOK && at() < cFrom + 500) { cAt = at(); [cOK] = await tryLock(c, name, { timeout: B_LEASE }); if (!cOK) await sleep(10); }
  const two = cOK && cAt < bEnds;
  console.log(cOK
    ? `C: tryLock true at ${cAt} ms; B's lease by its own timeout runs to ${bEnds} ms${two ? `: B and C both hold the lock for ${bEnds - cAt} ms` : ""}`
    : `C: tryLock false through ${at()} ms`);
  return { changed, two, how: after > before ? "lengthened" : "shortened" };
}

async function main() {
  const port = await freePort();
  redis = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
  redis.on("error", (e) => { console.error(`setup: redis-server: ${e.message}`); process.exit(2); });
  redis.on("exit", (code) => { if (code !== null) { console.error(`setup: redis-server exited ${code}`); process.exit(2); } });
  const proxy = await stallProxy(port);
  const url = (p) => `redis://127.0.0.1:${p}`;
  const clients = { a: createClient({ url: url(proxy.server.address().port) }), b: createClient({ url: url(port) }), c: createClient({ url: url(port) }), proxy };
  for (const n of ["a", "b", "c"]) {
    clients[n].on("error", (e) => console.error(`redis ${n}: ${e.message}`));
    for (let i = 0; ; i++) { try { await clients[n].connect(); break; } catch (e) { if (i > 50) throw e; await sleep(50); } }
  }
  // The library's release subscriber (a duplicate of the first client it
  // is given, here A through the proxy) starts on the first tryLock, and
  // the script cache on the first EVAL: both before anything is timed.
  await (await tryLock(clients.a, "warm-up", { timeout: A_LEASE }))[1]();
  await clients.a.eval(SCRIPT, { keys: ["warm-up"], arguments: ["x", "1"] });
  const lib = await race(clients, `lib-${process.pid}`, "library: release.refreshTimeout() (GET, then PEXPIRE)",
    (release) => release.refreshTimeout());
  // The contrast keeps the library's GET check and sends the script where
  // the library sends PEXPIRE, so that the same bytes are stalled.
  const fix = await race(clients, `fix-${process.pid}`, "contrast: GET, then compare-and-PEXPIRE script",
    async (release, key, token) => ((await clients.a.get(key)) === token
      ? clients.a.eval(SCRIPT, { keys: [key], arguments: [token, String(A_LEASE)] }) : "not-held"));
  const say = (r) => `${r.changed ? `${r.how} B's lease` : "left B's lease alone"}${r.two ? ", and C took the lock while B's lease ran" : ""}`;
  console.log(`summary: A's late refresh: library ${say(lib)}; script ${say(fix)}`);
  const bug = (r) => r.changed || r.two;
  process.exit(bug(lib) && !bug(fix) ? 1 : 0);
}

main().catch((e) => { console.error(e); process.exit(2); });
