// A hiatus lock adapter for the npm package etcd3 (Microsoft's etcd v3
// client), on the etcd init names (etcd_endpoints, --adapter-store etcd):
// lock = client.lock(name).ttl(seconds), await lock.acquire(), await
// lock.release(), as its Lock's documentation shows.
//   node adapters/node-census/etcd3.js [--careful]
// An etcd lease is whole seconds: the run's lease rounded up, and the grant
// says the lease it got (lease_ms). acquire() tries once (a transaction:
// the key not yet created), so it is tried again after the run's retry
// within hiatus's wait. The lock's lease is kept alive by the library
// itself, every third of its TTL, for as long as the process runs: each
// keepalive is reported (renewing, renewed). release() revokes the lease,
// and says nothing of one that had already expired.
// --careful asks etcd, before the release, how long the lock's lease has
// left (leaseTimeToLive of lock.leaseId(), the public API's one way to
// tell): none, and the release answers not-held.
"use strict";
const { serve, report, nextRenewal } = require("../node/protocol");
const { pinned, version } = require("./census");
const { Etcd3, EtcdLockFailedError, EtcdLeaseInvalidError } = pinned("etcd3");

const careful = process.argv.includes("--careful");
let client;
let retryMs = 5;
const held = new Map(); // token -> Lock

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// reportKeepalives reports the keepalives of the lock's lease (a private
// field: the Lock does not expose it), each written on its stream and
// answered in order.
function reportKeepalives(token, lease) {
  const open = [];
  const answered = (fields) => open.length && report("renewed", { renewal: open.shift(), ...fields });
  lease.on("keepaliveFired", () => {
    const renewal = nextRenewal();
    open.push(renewal);
    report("renewing", { renewal, token });
  });
  lease.on("keepaliveSucceeded", () => answered({ result: "ok" }));
  lease.on("keepaliveFailed", (e) => {
    const fields = e instanceof EtcdLeaseInvalidError ? { result: "fail", reason: "not-held" } : { result: "info", reason: String(e) };
    while (open.length) answered(fields);
  });
}

serve({
  init: async (req) => {
    if (!req.etcd_endpoints) throw new Error("no etcd_endpoints in init: run with --adapter-store etcd");
    client = new Etcd3({ hosts: req.etcd_endpoints });
    retryMs = Math.max(1, req.retry_ms || 5);
    const name = careful ? "etcd3-lock-careful" : "etcd3-lock";
    return ["hello", { name, version: "1", library: `etcd3 ${version("etcd3")}`, fencing: false, renewal: false }];
  },
  acquire: async (req) => {
    const seconds = Math.max(1, Math.ceil(req.lease_ms / 1000));
    const deadline = Date.now() + req.wait_ms;
    for (;;) {
      const lock = client.lock(req.lock).ttl(seconds);
      try {
        await lock.acquire();
      } catch (e) {
        if (!(e instanceof EtcdLockFailedError)) return ["info", { reason: String(e) }];
        if (Date.now() + retryMs > deadline) return ["fail", { reason: "busy" }];
        await sleep(retryMs);
        continue;
      }
      let token;
      try {
        token = await lock.leaseId();
      } catch (e) {
        // Held, but with no name to release it by: let it go rather than
        // leave its lease kept alive for good.
        await lock.release().catch(() => {});
        return ["info", { reason: String(e) }];
      }
      held.set(token, lock);
      reportKeepalives(token, lock.lease);
      return ["ok", { token, lease_ms: seconds * 1000 }];
    }
  },
  release: async (req) => {
    const lock = held.get(req.token);
    held.delete(req.token);
    if (!lock) return ["error", { reason: "no lock with that token" }];
    try {
      // TTL -1: the lease expired, and etcd deleted the lock's key with it.
      const lost = careful && Number((await client.leaseClient.leaseTimeToLive({ ID: req.token })).TTL) <= 0;
      await lock.release();
      return lost ? ["fail", { reason: "not-held" }] : ["ok"];
    } catch (e) {
      return ["info", { reason: String(e) }];
    }
  },
});
