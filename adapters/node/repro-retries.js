// A reproduction of node-redlock-retries without hiatus (docs/findings.md):
// CONTENDERS processes, each with its own Redlock on the same Redis nodes
// and its README's settings, take one resource, hold it 20 ms, release it,
// and again, for SECONDS; it prints the longest time no one held the
// resource, and how often that was longer than the 500 ms lease. With
// --retry-outside each acquire has no retries of redlock's and is called
// again after the same delay.
//   node adapters/node/repro-retries.js [--retry-outside] CONTENDERS SECONDS URL...
"use strict";
const { fork } = require("child_process");
const Redis = require("ioredis");
const Redlock = require("redlock").default;

const lease = 500;
const settings = { driftFactor: 0.01, retryDelay: 200, retryJitter: 200 };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// contend is one contender: it writes "take T" and "give T" (ms since the
// epoch) for each hold.
async function contend(outside, end, urls) {
  const clients = urls.map((u) => new Redis(u));
  const redlock = new Redlock(clients, outside ? { ...settings, retryCount: 0 } : settings);
  while (Date.now() < end) {
    let lock;
    try {
      lock = await redlock.acquire(["repro"], lease);
    } catch (e) {
      if (outside) await sleep(settings.retryDelay + Math.floor((Math.random() * 2 - 1) * settings.retryJitter));
      continue;
    }
    process.send(["take", Date.now()]);
    await sleep(20);
    process.send(["give", Date.now()]);
    await lock.release().catch(() => {});
  }
  clients.forEach((c) => c.disconnect());
}

if (process.argv[2] === "--child") {
  const [outside, end, ...urls] = process.argv.slice(3);
  contend(outside === "1", Number(end), urls).then(() => process.exit(0));
} else {
  const args = process.argv.slice(2);
  const outside = args[0] === "--retry-outside";
  if (outside) args.shift();
  const [n, seconds, ...urls] = [Number(args[0]), Number(args[1]), ...args.slice(2)];
  const end = Date.now() + 1000 + seconds * 1000; // a second for the children to start
  const events = [];
  let running = n;
  for (let i = 0; i < n; i++) {
    const child = fork(__filename, ["--child", outside ? "1" : "0", String(end), ...urls]);
    child.on("message", (m) => events.push(m));
    child.on("exit", () => {
      if (--running > 0) return;
      events.sort((a, b) => a[1] - b[1]);
      let free = 0, longest = 0, over = 0;
      for (const [what, t] of events) {
        if (what === "give") free = t;
        else if (free) {
          longest = Math.max(longest, t - free);
          if (t - free > lease) over++;
          free = 0;
        }
      }
      console.log(`${outside ? "retries outside" : "redlock's retries"}: ${events.length / 2} holds; ` +
        `the longest time with no holder ${longest} ms; ${over} longer than the ${lease} ms lease`);
    });
  }
}
