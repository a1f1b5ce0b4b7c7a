#!/usr/bin/python3
"""A reproduction, without hiatus, of tooz's redis lock retrying an acquire with a NEW token after a
connection error, so that the first attempt's landed SET NX orphans the key. Debian's python3-tooz
3.1.0 and python3-redis 4.3.4 (run with /usr/bin/python3; redis-server on PATH):

    /usr/bin/python3 adapters/python/repro_tooz_redis_retry.py

A throwaway redis-server; coordinator A (as tooz_lock.py uses tooz) talks to it through a proxy
that lets A's first lock SET ... NX reach Redis, drops Redis's reply and closes both sides. For
blocking=False, 1.0, True: what acquire() did, the key's value and PTTL, the SETs (commandstats,
proxy), tooz's retry log, when coordinator B (direct) gets the lock. There is no fixed variant to
contrast: the exit code depends on the blocking=False case alone.

Exit: 1 when, with blocking=False, the first SET landed, tooz retried with a new token and the
first token's key was left held by no one; 0 when it was not; 2 on a setup error (redis-server
missing or silent, a cited source line not found) or any other error. SIGTERM exits 143.
To count runs: for i in $(seq 5); do /usr/bin/python3 <this> >/dev/null; echo -n "$? "; done
"""
import logging, re, signal, socket, subprocess, sys, threading, time, traceback, uuid

import redis
from tooz import coordination

LEASE = 3  # seconds: tooz's lock_timeout, the lock key's PX
SET_NX = re.compile(rb"\*\d+\r\n\$3\r\nSET\r\n\$\d+\r\n([^\r]*_lock)\r\n\$\d+\r\n([^\r]*)\r\n(?:\$\d+\r\n[^\r]*\r\n)*?\$2\r\nNX\r\n", re.I)


def free_port():
    with socket.socket() as s:
        return s.bind(("127.0.0.1", 0)) or s.getsockname()[1]


class SetupError(Exception):
    """The run could not be set up: exit 2."""


def cite(path, *needles):
    """file:line of each needle's first occurrence in path (the installed source, not a copy)."""
    with open(path) as f:
        lines = f.read().split("\n")
    for n in needles:
        i = next((i for i, l in enumerate(lines) if n in l), None)
        if i is None:
            raise SetupError("%s: no line contains %r" % (path, n))
        print("  %s:%d: %s" % (path, i + 1, lines[i].strip()))


class Proxy:
    """Forwards 127.0.0.1:port <-> Redis; once armed, cuts the connection carrying the next SET NX
    of a lock key after Redis has answered it, before the answer reaches the client."""
    def __init__(self, upstream):
        self.upstream, self.armed, self.sets, self.dropped, self.mu = upstream, False, [], None, threading.Lock()
        self.ls = socket.create_server(("127.0.0.1", 0))
        self.port = self.ls.getsockname()[1]  # A's coordinator connects here
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            c, _ = self.ls.accept()
            s = socket.create_connection(("127.0.0.1", self.upstream))
            st = {"cut": False}
            threading.Thread(target=self.c2s, args=(c, s, st), daemon=True).start()
            threading.Thread(target=self.s2c, args=(s, c, st), daemon=True).start()

    def c2s(self, c, s, st):
        try:
            while data := c.recv(65536):
                if m := SET_NX.search(data):
                    with self.mu:
                        self.sets.append(m.group(2))
                        if self.armed:  # before the SET is forwarded: its reply cannot beat the flag
                            self.armed, st["cut"] = False, True
                s.sendall(data)
        except OSError:
            pass

    def s2c(self, s, c, st):
        try:
            while data := s.recv(65536):
                if st["cut"]:  # Redis executed the SET and answered: drop the answer, break both sides
                    self.dropped = data
                    for x in (c, s):  # shutdown wakes c2s's recv; a bare close() would not send the FIN
                        x.shutdown(socket.SHUT_RDWR), x.close()
                    return
                c.sendall(data)
        except OSError:
            pass


def scenario(blocking, proxy, r, a, b, logs):
    name = ("repro-%s" % uuid.uuid4().hex[:8]).encode()
    lock = a.get_lock(name)
    r.config_resetstat()
    with proxy.mu:
        proxy.sets, proxy.dropped, proxy.armed = [], None, True
    del logs[:]
    t0 = time.monotonic()
    try:
        got = lock.acquire(blocking=blocking)
        result = "returned %r" % got
    except Exception as e:  # not seen: tooz's retry swallows the ConnectionError
        got, result = None, "raised %r" % e
    took = time.monotonic() - t0
    calls = r.info("commandstats").get("cmdstat_set", {}).get("calls", 0)
    val, pttl, mine = r.get(lock.name), r.pttl(lock.name), lock._lock.local.token
    first = proxy.sets[0] if proxy.sets else None
    whose = ("none" if val is None else "1st attempt's token (the cut SET's)" if val == first
             else "A's lock object's token (a retry's)" if val == mine else "unknown")
    print("\n== A: lock.acquire(blocking=%r), lease %d s, key %r" % (blocking, LEASE, lock.name))
    print("A acquire() %s after %.3f s" % (result, took))
    print("proxy: reply dropped after the cut SET: %r" % proxy.dropped)
    print("SET NX tokens sent by A (proxy), in order: %d: %s" % (len(proxy.sets), [t.decode() for t in proxy.sets[:4]])
          + (" ..." if len(proxy.sets) > 4 else ""))
    print("Redis INFO commandstats cmdstat_set calls: %d" % calls)
    print("tooz log: %s" % (logs or "(nothing)"))
    print("key now: value=%r (%s), PTTL=%d ms; A's lock object's token: %r; A.is_still_owner()=%r"
          % (val, whose, pttl, mine, lock.is_still_owner()))
    lb, t1, b_at = b.get_lock(name), time.monotonic(), None
    b_first = lb.acquire(blocking=False)  # B: another coordinator, straight to Redis
    if got is not True:
        while b_at is None and time.monotonic() - t1 < 3 * LEASE:
            if b_first or lb.acquire(blocking=False):
                b_at = time.monotonic() - t1
            else:
                time.sleep(0.02)
        print("B acquire(blocking=False) right after: %r; B first got the lock %s" % (b_first,
              "after %.3f s" % b_at if b_at is not None else "never within %d s" % (3 * LEASE)))
        if b_at is not None:
            lb.release()
    else:
        print("B acquire(blocking=False) right after: %r (A holds it now, with the retry's token)" % b_first)
        lock.release()
    return dict(blocking=blocking, result=result, took=took, retried=calls >= 2 and len(set(proxy.sets)) >= 2,
                landed=(proxy.dropped or b"").startswith(b"+OK"), orphan=val is not None and val == first != mine,
                b_at=b_at, got=got, pttl=pttl)


def main():
    logs, h = [], logging.Handler()
    h.emit = lambda rec: logs.append(rec.getMessage())  # tooz's "will retry" is at DEBUG
    logging.getLogger("tooz.drivers.redis").setLevel(logging.DEBUG)
    logging.getLogger("tooz.drivers.redis").addHandler(h)
    port = free_port()
    try:
        srv = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    except OSError as e:
        raise SetupError("redis-server: %s" % e)
    a = b = None
    try:  # from here on, any exit (SIGTERM's SystemExit, Ctrl-C, an error) kills redis-server
        try:
            r = redis.Redis(port=port)
            for _ in range(100):
                try:
                    r.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.05)
            else:
                raise RuntimeError("redis-server did not answer on port %d" % port)
            proxy = Proxy(port)
            url = "redis://127.0.0.1:%d?timeout=5&lock_timeout=%d"
            a = coordination.get_coordinator(url % (proxy.port, LEASE), b"A-" + uuid.uuid4().hex.encode())
            b = coordination.get_coordinator(url % (port, LEASE), b"B-" + uuid.uuid4().hex.encode())
            a.start(start_heart=False), b.start(start_heart=False)
        except Exception as e:
            raise SetupError(repr(e))
        print("tooz %s, redis-py %s, redis-server %s" % (coordination.__file__, redis.__version__,
              subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()[2][2:]))
        print("Source (installed):")
        d = "/usr/lib/python3/dist-packages/"
        cite(d + "tooz/drivers/redis.py", "def _handle_failures(n_tries=15)", "while ntries:",
             "return func(*args, **kwargs)", "except exceptions.ConnectionError as e:", "will retry",
             "def acquire(self, blocking=True, shared=False)", "acquired = self._lock.acquire(")
        cite(d + "redis/lock.py", "if token is None:", "token = uuid.uuid1().hex.encode()",
             "self.redis.set(self.name, token, nx=True, px=timeout)")
        res = [scenario(bl, proxy, r, a, b, logs) for bl in (False, 1.0, True)]
        print("\nSummary:")
        for x in res:
            print("- blocking=%r: 1st SET landed (its +OK dropped): %s; tooz retried with a new token: %s; A's acquire "
                  "%s in %.2f s; " % (x["blocking"], x["landed"], x["retried"], x["result"], x["took"])
                  + ("the key then held A's retry token: A waited out its own orphan" if x["got"] is True else
                     "key left with the 1st token, held by no one (PTTL %d ms): %s; B kept out %s" % (x["pttl"],
                     x["orphan"], "%.2f s" % x["b_at"] if x["b_at"] is not None else "throughout")))
        ok = all(x["landed"] and x["retried"] for x in res) and all(x["orphan"] for x in res if x["got"] is not True)
        print("Lead %s: after a connection cut between the SET's landing and its reply, tooz's "
              "_handle_failures re-runs RedisLock.acquire, redis-py's Lock.acquire mints a new token, and the "
              "first token's key is held by no one until its PX expires (availability, not safety)."
              % ("CONFIRMED" if ok else "NOT confirmed as stated (see above)"))
        x = res[0]  # blocking=False
        return 1 if x["landed"] and x["retried"] and x["orphan"] else 0
    finally:
        for c in (a, b):
            try:
                c and c.stop()
            except Exception:
                pass
        srv.kill(), srv.wait()


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        sys.exit(main())
    except SetupError as e:
        print("setup error: %s" % e, file=sys.stderr)
        sys.exit(2)
    except Exception:  # not a result either way
        traceback.print_exc()
        sys.exit(2)
