#!/usr/bin/python3
"""A hiatus lock adapter for etcd3gw's Lock, etcd's grpc-gateway client (docs/adapter-protocol.md).

Debian's python3-etcd3gw (2.0.0) lives in /usr/bin/python3, hence the interpreter above.
    hiatus run --lock exec:adapters/python/etcd3gw_lock.py --adapter-store etcd
    hiatus adapter check 'adapters/python/etcd3gw_lock.py --endpoints http://127.0.0.1:2379'
On init's etcd_endpoints (or --endpoints when init has none): the first of them, for an
Etcd3Client talks to one. Used as its docs show (etcd3gw/examples/etcd.py, its docstrings):
Etcd3Client(host, port).lock(name, ttl), lock.acquire() (one attempt: repeated every retry_ms
until the wait is up), lock.release(), lock.refresh() for each renew (-1: "the lease was already
expired": not-held). The lease is the ttl, in whole seconds (the run's rounded up; etcd may grant
more, its minimum TTL: the lease's grantedTTL is answered as lease_ms). The key is /locks/NAME.
A release or renew the library says failed answers stolen when the key is there (client.get).

--careful: each renew also asks lock.is_acquired() (the key holds this lock's uuid), and a failed
attempt's lease, which acquire() leaves alive for its ttl, is revoked.

Two departures, for etcd3gw 2.0.0: api_path="/v3/" (its default /v3alpha/ is gone from etcd 3.4's
gateway: 404); and Etcd3Client's timeout is not passed, for 2.0.0 sets it on the requests.Session,
which ignores it (etcd3gw/client.py:56-57; fixed in 2.4.0): each call waits for its answer.
"""
import argparse
import math
import sys
import time
from urllib.parse import urlsplit

import etcd3gw
from etcd3gw.utils import LOCK_PREFIX

from protocol import answer, refuse, serve

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--careful", action="store_true", help="renew checks is_acquired(); revoke a failed attempt's lease")
parser.add_argument("--endpoints", default="", help="etcd's client URLs (comma-separated) when init has no etcd_endpoints")
args = parser.parse_args()

client = None
retry = 0.005
held = {}  # token (the lock's uuid) -> the Lock that holds it
granted = {}  # ttl asked -> the lease's grantedTTL


def lost(lock):
    """After the library said the lock is not ours: whether another holds its key."""
    try:
        return "stolen" if client.get(lock.key) else "not-held"
    except Exception:
        return "not-held"


def acquire(req):
    ttl = max(1, math.ceil(req["lease_ms"] / 1000))
    lock = client.lock(req["lock"], ttl=ttl)
    deadline = time.monotonic() + req.get("wait_ms", 0) / 1000
    while True:
        try:
            got = lock.acquire()
        except Exception as e:  # the txn may have landed
            return answer(req, "info", reason=repr(e))
        if got:
            break
        if args.careful:
            try:
                lock.lease.revoke()
            except Exception:
                pass
        if time.monotonic() + retry > deadline:
            return answer(req, "fail", reason="busy")
        time.sleep(retry)
    if ttl not in granted:
        try:
            r = client.post(client.get_url("/kv/lease/timetolive"), json={"ID": lock.lease.id})
            granted[ttl] = int(r.get("grantedTTL", ttl))
        except Exception:
            pass
    held[lock.uuid] = lock
    lease_ms = granted.get(ttl, ttl) * 1000
    if lease_ms != req["lease_ms"]:
        return answer(req, "ok", token=lock.uuid, lease_ms=lease_ms)
    return answer(req, "ok", token=lock.uuid)


def settle(req, lock, call):
    """Answers req by call(): ok when it says the lock was the holder's, info when it raised."""
    try:
        ok = call()
    except Exception as e:
        return answer(req, "info", reason=repr(e))
    if ok:
        return answer(req, "ok")
    return answer(req, "fail", reason=lost(lock))


def release(req):
    lock = held.pop(req["token"])
    return settle(req, lock, lock.release)


def renew(req):
    lock = held[req["token"]]
    return settle(req, lock, lambda: lock.refresh() > 0 and (not args.careful or lock.is_acquired()))


def handle(req):
    global client, retry
    kind = req.get("type")
    if kind == "init":
        if not (req.get("etcd_endpoints") or args.endpoints):
            sys.exit("etcd3gw_lock.py: init has no etcd_endpoints (hiatus --adapter-store etcd), nor is there --endpoints")
        u = urlsplit((req.get("etcd_endpoints") or args.endpoints.split(","))[0])
        client = etcd3gw.Etcd3Client(host=u.hostname, port=u.port or 2379, protocol=u.scheme or "http", api_path="/v3/")
        retry = req.get("retry_ms", 5) / 1000
        return answer(req, "hello", name="etcd3gw-lock", version="1", fencing=False, renewal=True,
                      library="etcd3gw " + etcd3gw.__version__, key=LOCK_PREFIX + req["lock"])
    if kind == "acquire" and req.get("lease_ms"):
        return acquire(req)
    if kind == "release" and req.get("token") in held:
        return release(req)
    if kind == "renew" and req.get("token") in held:
        return renew(req)
    refuse(req)


serve(handle)
