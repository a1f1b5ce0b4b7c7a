// Repro: etcd3 (npm) Lock.acquire() whose transaction errors after etcd
// applied it. lib/lock.js grants a lease (which starts keeping itself
// alive), commits "create the key under the lease if absent", and calls
// release() only when the txn answered succeeded=false: a txn *error* rejects
// acquire() with the lease left granted and kept alive. Is the key orphaned?
//   node adapters/node-census/repro-etcd3-orphan.js [--deadline] [--ttl N]
// A talks to etcd through a TCP proxy in this script; B talks to etcd
// directly. Once A's lease grant has been answered (before the txn can be
// written), the proxy holds etcd's replies to A: the txn reaches etcd and is
// applied (B sees the key) but its answer does not come back. Then
//   default:    the proxy drops A's connections and refuses new ones until
//               acquire() settles (a broken connection; A's client is built
//               as etcd3.js builds it: new Etcd3({ hosts }), no deadline);
//   --deadline: A's client has the documented per-call deadline
//               (defaultCallOptions, 500 ms, unary calls only); replies stay
//               held until acquire() settles, then flow again.
// The outage ends when acquire() settles, so the library's own retries of the
// txn (pool's global policy: 3 retries) fail too; a retry that got through
// would see the key, answer succeeded=false and revoke (no orphan).
// Then, over three lease periods: the key, its lease's TTL, A's keepalives,
// and B's lock(name).acquire(). Contrast: the same acquire with a catch
// around the txn that revokes the lease.
// Exit: 1 when the stock acquire left the orphan (rejected, the key held by
// A's live lease through every period watched, B refused at every check) and
// the fix did not; 0 when the stock run showed no orphan (or the fix run did
// too: not a clean repro); 2 on a setup error (etcd missing or dead, a module
// missing, a bad --ttl, an interrupt). Its temp data dir is removed on exit.
// To count runs: for i in $(seq 5); do node <this> >/dev/null; echo -n "$? "; done
"use strict";
let etcd, dir, done = false; // done: etcd's exit is ours, not a setup error
process.on("uncaughtException", (e) => { console.error(`setup error: ${e.stack || e}`); shutdown(2); }); // e.g. a module missing
const net = require("net"), fs = require("fs"), os = require("os"), path = require("path");
const { spawn } = require("child_process");
const { pinned, version } = require("./census");
const { Etcd3, EtcdLockFailedError } = pinned("etcd3");
const { ComparatorBuilder, PutBuilder } = pinned("etcd3/lib/builder");
const { Lease } = pinned("etcd3/lib/lease");
const RPC = pinned("etcd3/lib/rpc");

const deadline = process.argv.includes("--deadline");
const ttlAt = process.argv.indexOf("--ttl");
const TTL = ttlAt < 0 ? 6 : Number(process.argv[ttlAt + 1]);
const PERIODS = 3;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (...a) => console.log(...a);
const errName = (e) => `${e.constructor.name}: ${e.message}`;

function running() { return etcd && etcd.exitCode === null && etcd.signalCode === null; }
function removeDir() { // retried: a dying etcd may still be creating files in it
  if (dir) { try { fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 }); } catch {} dir = null; }
}
// shutdown kills etcd, waits (up to 5 s) for it to exit, removes its data dir, and exits.
async function shutdown(code) {
  done = true;
  if (running()) {
    const exited = new Promise((r) => etcd.once("exit", r));
    try { etcd.kill("SIGKILL"); } catch {}
    await Promise.race([exited, sleep(5000)]);
  }
  removeDir();
  process.exit(code);
}
process.on("exit", () => { if (running()) try { etcd.kill("SIGKILL"); } catch {} removeDir(); }); // a last resort
for (const s of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(s, () => shutdown(2));

function freePort() {
  return new Promise((res, rej) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => res(p)); });
    s.on("error", rej);
  });
}

// proxy: client->etcd always forwarded; etcd->client forwarded ("pass"),
// held ("stall"), or every connection dropped and new ones refused ("down").
function startProxy(target) {
  const conns = new Set();
  let mode = "pass";
  const srv = net.createServer((c) => {
    if (mode === "down") return c.destroy();
    const k = { c, u: net.connect(target, "127.0.0.1"), held: [] };
    conns.add(k);
    c.on("data", (d) => k.u.write(d));
    k.u.on("data", (d) => (mode === "pass" ? c.write(d) : k.held.push(d)));
    const end = () => { c.destroy(); k.u.destroy(); conns.delete(k); };
    for (const s of [c, k.u]) s.on("error", end).on("close", end);
  });
  const set = (m) => {
    mode = m;
    for (const k of conns) {
      if (m === "down") { k.c.destroy(); k.u.destroy(); }
      if (m === "pass") { for (const d of k.held) k.c.write(d); k.held = []; }
    }
  };
  return new Promise((res) => srv.listen(0, "127.0.0.1", () => res({ port: srv.address().port, set, srv })));
}

// fixedAcquire: lib/lock.js:61-81 as shipped, plus the fix: a catch around
// the txn that revokes the lease (revoke() first closes it: no keepalives).
function fixedAcquire(lock) {
  const lease = (lock.lease = new Lease(lock.pool, lock.namespace, lock.leaseTTL));
  const kv = new RPC.KVClient(lock.pool);
  return lease.grant().then((id) =>
    new ComparatorBuilder(kv, lock.namespace).and(lock.key, "Create", "==", 0)
      .then(new PutBuilder(kv, lock.namespace, lock.key).value("").lease(id))
      .options(lock.callOptions).commit()
      .catch((e) => lease.revoke()
        .then(() => log("    (fix) lease revoked in the catch"),
          (r) => log(`    (fix) revoke RPC failed (${r.constructor.name}); lease closed: no more keepalives`))
        .then(() => { throw e; }))
      .then((res) => {
        if (res.succeeded) return lock;
        return lock.release().catch(() => undefined).then(() => { throw new EtcdLockFailedError(`Failed to acquire a lock on ${lock.key}`); });
      }));
}

async function bTry(B, key) {
  const l = B.lock(key).ttl(TTL);
  try { await l.acquire(); } catch (e) { return e instanceof EtcdLockFailedError ? "refused" : `error ${errName(e)}`; }
  await l.release();
  return "ACQUIRED (then released)";
}

async function scenario(B, px, fixed) {
  const key = `hiatus-orphan-${fixed ? "fixed" : "stock"}-${process.pid}`;
  const label = fixed ? "FIX (revoke on txn error)" : "STOCK etcd3 1.1.2 Lock.acquire()";
  log(`\n=== ${label}: key ${key}, ttl ${TTL}s, ${deadline ? "deadline 500ms + held replies" : "broken connection"} ===`);
  px.set("pass");
  const opts = { hosts: `127.0.0.1:${px.port}` };
  if (deadline) opts.defaultCallOptions = (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + 500 });
  const A = new Etcd3(opts);
  const lock = A.lock(key).ttl(TTL);
  const t0 = Date.now(), ts = () => `t=${((Date.now() - t0) / 1000).toFixed(1)}s`;
  const settled = (fixed ? fixedAcquire(lock) : lock.acquire()).then(
    () => ({ ok: true, text: "RESOLVED (A holds the lock)" }), (e) => ({ ok: false, text: `REJECTED ${errName(e)}` }));
  const lease = lock.lease, ev = { succeeded: 0, failed: 0, lost: null };
  lease.on("keepaliveSucceeded", () => ev.succeeded++);
  lease.on("keepaliveFailed", () => ev.failed++);
  lease.on("lost", (e) => { ev.lost = `${ts()} ${errName(e)}`; log(`    A: lease 'lost' at ${ev.lost}`); });
  // The grant was answered: hold etcd's replies before the txn can be written.
  lease.grant().then(() => { px.set("stall"); log(`  [${ts()}] grant answered to A; proxy now holds etcd's replies to A`); }, () => {});
  let kv = null;
  for (let i = 0; i < 100 && !kv; i++) { kv = (await B.get(key).exec()).kvs[0]; if (!kv) await sleep(20); }
  if (!kv) throw new Error("setup: A's txn never reached etcd");
  const leaseId = kv.lease;
  log(`  [${ts()}] B sees the key in etcd: lease ${leaseId} (A's lease ${await lease.grant()}), create_revision ${kv.create_revision}; A has no answer yet`);
  if (!deadline) { px.set("down"); log(`  [${ts()}] proxy drops A's connections, refuses new ones until A's acquire settles`); }
  const out = await settled;
  px.set("pass");
  log(`  [${ts()}] A's acquire(): ${out.text}; proxy forwards again`);
  const kaAt = ev.succeeded, tFail = Date.now();
  const rows = [];
  let goneAt = null; // polled every 250 ms by B
  for (let p = 0; p <= PERIODS; p++) {
    for (const end = tFail + p * TTL * 1000; Date.now() < end; await sleep(250))
      if (!goneAt && !(await B.get(key).exec()).kvs.length) { goneAt = ts(); log(`  [${goneAt}] key gone from etcd`); }
    const k = (await B.get(key).exec()).kvs[0];
    const ttl = await B.leaseClient.leaseTimeToLive({ ID: leaseId }).catch((e) => ({ TTL: `err ${e.constructor.name}` }));
    const b = await bTry(B, key);
    if (!k && !goneAt) goneAt = ts();
    rows.push({ b, held: !!k });
    log(`  [${ts()}] key ${k ? `present, lease ${k.lease}` : "absent"}; lease TTL ${ttl.TTL}s (granted ${ttl.grantedTTL || "-"}); ` +
      `A keepalives ok since failure ${ev.succeeded - kaAt}, failed ${ev.failed}; lost ${ev.lost ? "yes" : "no"}; B acquire: ${b}`);
  }
  const res = { label, a: out.text, heldAll: rows.every((r) => r.held) && !goneAt, refused: rows.filter((r) => r.b === "refused").length,
    firstB: rows.findIndex((r) => r.b.startsWith("ACQUIRED")), goneAt, ka: ev.succeeded - kaAt, lost: ev.lost };
  lease.close(); A.close();
  return res;
}

async function main() {
  log(`etcd3 ${version("etcd3")}, node ${process.version}, args [${process.argv.slice(2).join(" ")}]`);
  if (!(TTL > 0)) throw new Error(`setup: --ttl needs a positive number of seconds, got ${process.argv[ttlAt + 1]}`);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "etcd-orphan-"));
  const [cport, pport] = [await freePort(), await freePort()];
  const c = `http://127.0.0.1:${cport}`, p = `http://127.0.0.1:${pport}`;
  etcd = spawn("/usr/bin/etcd", ["--name", "n1", "--data-dir", dir, "--listen-client-urls", c, "--advertise-client-urls", c,
    "--listen-peer-urls", p, "--initial-advertise-peer-urls", p, "--initial-cluster", `n1=${p}`], { stdio: ["ignore", "ignore", "pipe"] });
  let etcdErr = "";
  etcd.stderr.on("data", (d) => { etcdErr = (etcdErr + d).slice(-2000); });
  etcd.on("error", (e) => { if (!done) { console.error(`setup: /usr/bin/etcd: ${e.message}`); shutdown(2); } });
  etcd.on("exit", (code, sig) => { if (!done) { console.error(`setup: etcd exited (${code ?? sig}):\n${etcdErr}`); shutdown(2); } });
  const B = new Etcd3({ hosts: `127.0.0.1:${cport}` });
  for (let i = 0; ; i++) {
    try { await B.get("ping").exec(); break; } catch (e) { if (i > 100) throw new Error(`setup: etcd not ready: ${e}`); await sleep(100); }
  }
  log(`etcd ${c} (data ${dir}); A via proxy, B direct`);
  const px = await startProxy(cport);
  const results = [await scenario(B, px, false), await scenario(B, px, true)];
  log("\n=== summary ===");
  for (const r of results) {
    log(`${r.label}: A's acquire ${r.a}`);
    log(`  key held by A's lease through all ${PERIODS} periods after the failure: ${r.heldAll ? "YES" : "no"}; ` +
      `key gone ${r.goneAt || "never"}; B refused ${r.refused}/${PERIODS + 1}; B first acquired ${r.firstB < 0 ? "never" : `at check ${r.firstB} (${r.firstB * TTL}s after the failure)`}; ` +
      `A's keepalives after the failure: ${r.ka}; A's lease 'lost': ${r.lost || "never"}`);
  }
  const [s, f] = results;
  const orphan = s.heldAll && s.firstB < 0 && !s.a.startsWith("RESOLVED");
  const bug = (r) => r.heldAll && r.refused === PERIODS + 1 && !r.a.startsWith("RESOLVED");
  log(orphan ? "=> ORPHAN: acquire() rejected, yet A's process keeps the lock's lease alive; nobody holds the lock and B can never get it (availability, not safety)."
    : "=> no orphan in this run (see rows above).");
  log(f.firstB >= 0 ? `=> with the revoke-on-error fix B acquires (check ${f.firstB}).` : "=> the fix run did not free the lock.");
  px.srv.close(); B.close();
  await shutdown(bug(s) && !bug(f) ? 1 : 0);
}
main().catch((e) => { console.error(`setup error: ${e.stack || e}`); shutdown(2); });
