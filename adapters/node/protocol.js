// The lock adapter protocol's loop for Node adapters (docs/adapter-protocol.md):
// one JSON request a line on stdin, one answer a line on stdout, in order.
"use strict";
const fs = require("fs");
const path = require("path");
const readline = require("readline");

// version is the installed version of the npm package pkg, for the hello:
// read from its package.json (which some packages' exports do not let
// require) in the node_modules of dir, this directory's by default.
function version(pkg, dir = __dirname) {
  const file = path.join(dir, "node_modules", pkg, "package.json");
  return JSON.parse(fs.readFileSync(file, "utf8")).version;
}

function answer(req, type, fields = {}) {
  process.stdout.write(JSON.stringify({ ...fields, type, in_reply_to: req.id }) + "\n");
}

// report writes a line of the adapter's own accord, answering no request:
// a renewal its library makes on its own, begun or answered.
function report(type, fields) {
  process.stdout.write(JSON.stringify({ ...fields, type }) + "\n");
}

// nextRenewal numbers a renewal the library begins, for its renewing and
// renewed reports.
let renewals = 0;
function nextRenewal() {
  return ++renewals;
}

// reportRefreshes has the library's own refreshes of a grant reported, as
// refresh, one of them (returning whether it refreshed), is called.
function reportRefreshes(token, refresh) {
  return async (...args) => {
    const renewal = nextRenewal();
    report("renewing", { renewal, token });
    try {
      const ok = await refresh(...args);
      report("renewed", ok ? { renewal, result: "ok" } : { renewal, result: "fail", reason: "not-held" });
      return ok;
    } catch (e) {
      report("renewed", { renewal, result: "info", reason: String(e) });
      throw e;
    }
  };
}

// serve answers each request with handlers[type](req), which returns
// [type, fields]; a request it has no handler for is answered "error".
function serve(handlers) {
  const rl = readline.createInterface({ input: process.stdin });
  let queue = Promise.resolve(); // one request at a time, as hiatus sends them
  rl.on("line", (line) => {
    const req = JSON.parse(line);
    queue = queue.then(async () => {
      const handle = handlers[req.type];
      if (!handle || (req.type !== "init" && !req.lock)) {
        return answer(req, "error", { reason: `cannot do ${JSON.stringify(req.type)} with these fields` });
      }
      const [type, fields] = await handle(req);
      answer(req, type, type === "hello" && followsSentinels ? { ...fields, sentinel: true } : fields);
    });
  });
  rl.on("close", () => queue.then(() => process.exit(0)));
}

// redisClients makes a client of Redis (the caller's ioredis, as its
// directory pins it) for each of the lock's nodes, in node order (init's
// redis_urls, else its redis_url), named as init says for the lock
// server's record, and retrying a request once at most. Told sentinels
// (--adapter-store sentinel), it makes one client of the primary they name,
// which follows their failovers; sentinel_nat maps the addresses they give
// to those to dial (ioredis's natMap); and the adapter's hello then says
// sentinel: true, which hiatus asks of an adapter it tells sentinels.
let followsSentinels = false; // the hello says so (sentinel: true) once a client follows them
function redisClients(Redis, req) {
  const options = { maxRetriesPerRequest: 1, connectionName: req.client_name || undefined };
  if (req.sentinels) {
    followsSentinels = true;
    const hostPort = (addr) => {
      const i = addr.lastIndexOf(':');
      return { host: addr.slice(0, i), port: Number(addr.slice(i + 1)) };
    };
    const natMap = Object.fromEntries(Object.entries(req.sentinel_nat || {}).map(([from, to]) => [from, hostPort(to)]));
    return [new Redis({ ...options, sentinels: req.sentinels.map(hostPort), name: req.sentinel_master, natMap })];
  }
  return (req.redis_urls || [req.redis_url]).map((url) => new Redis(url, options));
}

module.exports = { serve, version, report, nextRenewal, reportRefreshes, redisClients };
