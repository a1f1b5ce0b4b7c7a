#!/usr/bin/python3
"""A hiatus lock adapter for OpenStack tooz's distributed lock (docs/adapter-protocol.md), on one of
three of its drivers. Debian's python3-tooz (3.1.0) and python3-etcd3gw live in /usr/bin/python3.
    hiatus run --lock 'exec:adapters/python/tooz_lock.py redis'
    hiatus run --lock 'exec:adapters/python/tooz_lock.py zookeeper' --adapter-store zookeeper
    hiatus run --lock 'exec:adapters/python/tooz_lock.py etcd3gw' --adapter-store etcd
    (etcd3gw without etcd_endpoints in init: add --endpoints http://127.0.0.1:2379)

Used as tooz's docs and OpenStack's services (cinder/coordination.py) use it: get_coordinator(URL,
member_id as bytes); start(start_heart=True); get_lock(bytes name); acquire(blocking=the
wait in seconds); release(). The lease is the driver's option, in whole seconds (the run's lease
rounded up, answered as lease_ms): redis://HOST:PORT?db=N&timeout=S&lock_timeout=S (timeout is also
the socket timeout), kazoo://HOST:PORT?timeout=S (the session's timeout; one session a lease),
etcd3+http://HOST:PORT?api_version=v3&timeout=S&lock_timeout=S (etcd's own minimum TTL may grant
more: its lease's grantedTTL is answered). The heart (redis, etcd3gw) renews each held lock every
lease/2 in a thread of the adapter's: each renewal is reported (renewing, renewed).

--careful: as a careful user checks before each write: renewal yes, each renew is the library's
lock.heartbeat() (redis: a token-checked PEXPIRE; etcd3gw: a refresh of the lease), or
lock.is_still_owner() where there is none (zookeeper); a release asks is_still_owner() first
(zookeeper's release says True of a znode its expired session lost), but on etcd3gw, whose lock
has no is_still_owner(). Without it, renewal no.

Where the library cannot be used as documented, and what the adapter does instead:
- redis: tooz passes only its CLIENT_ARGS to redis-py (drivers/redis.py:254), no client_name:
  RedisDriver._make_client is wrapped to set it on the pool before any connection is made.
- redis: the key is "b'_tooz'_b'NAME'_lock" (drivers/redis.py:81 formats bytes with %s), answered.
- zookeeper: the session is named as kazoo_lock.py does, by the KazooClient (coordinator._coord),
  beside tooz's znode /tooz/locks/NAME, which is answered as the key the record watches.
- zookeeper: a timed-out acquire raises kazoo's LockTimeout through tooz (not False): busy.
- etcd3gw: tooz calls etcd3gw.client(api_path=...), which etcd3gw 2.0.0 lacks (2.1.0 has it):
  a TypeError at get_coordinator; the adapter gives etcd3gw.client the parameter, as 2.1.0 does.
  tooz's default api_version v3alpha is gone from etcd 3.4's gateway (404): api_version=v3.
- etcd3gw: acquire(blocking=0 or 1) never gives up (tooz/_retry.py:26 takes 0 and 1 for False
  and True): the adapter asks for False or 1.001 instead; a timed-out acquire raises tenacity's
  RetryError (not False): busy. It tries once a second, so it may wait up to a second longer.

What it shows (hypotheses, file:line in /usr/lib/python3/dist-packages): etcd3gw's heartbeat()
answers True of a lease etcd expired (tooz/drivers/etcd3gw.py:158-163 drops refresh()'s -1), so
'etcd3gw --careful' with --extend-before-write writes stale (lost updates after a stop longer than
the lease); zookeeper's release() answers True of a znode its expired session lost (zookeeper.py:65).
"""
import argparse
import inspect
import itertools
import logging
import math
import os
import sys
import threading
import uuid
from importlib import metadata
from urllib.parse import urlsplit

import tenacity
from tooz import coordination

from protocol import answer, refuse, report, serve

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("driver", choices=["redis", "zookeeper", "etcd3gw"])
parser.add_argument("--careful", action="store_true", help="renew by heartbeat()/is_still_owner(); check before release")
parser.add_argument("--endpoints", default="", help="etcd3gw: etcd's client URLs (comma-separated) when init has no etcd_endpoints")
args = parser.parse_args()

beating = threading.Lock()  # a renewal's report before the grant's release: the record's order
init = {}
name = b""  # the lock's, as bytes (cinder: lock_name.encode('ascii'))
key = ""
client_name = ""
coords = {}  # lease in seconds -> its started coordinator
held = {}  # token -> (the tooz lock, its coordinator, its own heartbeat or None)
granted = {}  # etcd3gw: coordinator -> the grantedTTL its lock_timeout got
named = set()  # zookeeper: the sessions whose name is said
renewals = itertools.count(1)

if args.driver == "redis":
    from redis.exceptions import LockError
    from tooz.drivers import redis as tooz_redis

    make_client = tooz_redis.RedisDriver._make_client.__func__

    def named_client(cls, parsed_url, options, default_socket_timeout):
        c = make_client(cls, parsed_url, options, default_socket_timeout)
        if client_name:  # before any connection: each says CLIENT SETNAME on connecting
            c.connection_pool.connection_kwargs["client_name"] = client_name
        return c
    tooz_redis.RedisDriver._make_client = classmethod(named_client)
else:
    class LockError(Exception):
        pass
if args.driver == "zookeeper":
    from kazoo.exceptions import LockTimeout, NodeExistsError
else:
    class LockTimeout(Exception):
        pass
if args.driver == "etcd3gw":
    import etcd3gw

    if "api_path" not in inspect.signature(etcd3gw.client).parameters:
        def client_with_api_path(api_path="/v3alpha/", **kwargs):
            return etcd3gw.Etcd3Client(api_path=api_path, **kwargs)
        etcd3gw.client = client_with_api_path


def url(lease_s):
    if args.driver == "redis":
        u = urlsplit(init["redis_url"])
        return "redis://%s?db=%s&timeout=%d&lock_timeout=%d" % (u.netloc, u.path.strip("/") or "0", lease_s, lease_s)
    if args.driver == "zookeeper":
        if not init.get("zookeeper"):
            sys.exit("tooz_lock.py zookeeper: init has no zookeeper: run hiatus with --adapter-store zookeeper")
        hosts = init["zookeeper"].split(",")
        return "kazoo://%s?timeout=%d" % (hosts[0], lease_s) + "".join("&hosts=" + h for h in hosts[1:])
    if not (init.get("etcd_endpoints") or args.endpoints):
        sys.exit("tooz_lock.py etcd3gw: init has no etcd_endpoints (hiatus --adapter-store etcd), nor is there --endpoints")
    u = urlsplit((init.get("etcd_endpoints") or args.endpoints.split(","))[0])
    return "etcd3+%s://%s?api_version=v3&timeout=%d&lock_timeout=%d" % (u.scheme, u.netloc, lease_s, lease_s)


def coordinator(lease_ms):
    lease_s = max(1, math.ceil(lease_ms / 1000))
    if lease_s not in coords:
        member = ("hiatus-%s-%s" % (client_name or "adapter", uuid.uuid4())).encode("ascii")
        c = coordination.get_coordinator(url(lease_s), member)
        c.start(start_heart=True)
        coords[lease_s] = c
    return coords[lease_s], lease_s


def announce(coord):
    """Say whose the session is, beside tooz's znode, before the session makes one (kazoo_lock.py)."""
    zk = coord._coord
    session = zk.client_id[0] if zk.client_id else None
    if not client_name or session is None or session in named:
        return
    try:
        zk.create("%s-clients/%x" % (key, session), client_name.encode(), ephemeral=True, makepath=True)
    except NodeExistsError:
        pass
    named.add(session)


def lost(e):
    """Whether the library's error says the lock is no longer the holder's (redis-py's LockNotOwnedError)."""
    return isinstance(e.__cause__, LockError) or isinstance(e, LockError)


def reporting(lock, token):
    """Reports each renewal the heart makes of lock (coordinator.heartbeat calls lock.heartbeat())."""
    beat = lock.heartbeat

    def heartbeat():
        with beating:
            if token not in held:
                return beat()
            n = next(renewals)
            report(type="renewing", renewal=n, token=token)
            try:
                r = beat()
            except Exception as e:
                if lost(e):
                    report(type="renewed", renewal=n, result="fail", reason="not-held")
                else:
                    report(type="renewed", renewal=n, result="info", reason=repr(e))
                raise
            report(type="renewed", renewal=n, **({"result": "ok"} if r else {"result": "fail", "reason": "not-held"}))
            return r
    lock.heartbeat = heartbeat
    return beat


def acquire(req):
    coord, lease_s = coordinator(req["lease_ms"])
    lock = coord.get_lock(name)
    wait = req.get("wait_ms", 0) / 1000
    if args.driver == "etcd3gw" and wait in (0, 1):  # tooz/_retry.py:26: 0 and 1 are False and True
        wait = False if wait == 0 else 1.001
    try:
        if args.driver == "zookeeper":
            announce(coord)
        got = lock.acquire(blocking=wait)
    except (tenacity.RetryError, LockTimeout):  # etcd3gw's, kazoo's: it gave up, holding nothing
        got = False
    except Exception as e:  # the SET, the znode, the txn may have landed
        return answer(req, "info", reason=repr(e))
    if not got:
        return answer(req, "fail", reason="busy")
    lease_ms = lease_s * 1000
    if args.driver == "redis":
        token = lock._lock.local.token.decode()
    elif args.driver == "zookeeper":
        token = lock._lock.path + "/" + lock._lock.node
    else:
        token = lock._uuid
        if coord not in granted:  # etcd's minimum TTL (1.5 x its election timeout) may grant more
            try:
                r = coord.client.post(coord.client.get_url("/kv/lease/timetolive"), json={"ID": lock._lease.id})
                granted[coord] = int(r.get("grantedTTL", lease_s))
            except Exception:
                pass
        lease_ms = granted.get(coord, lease_s) * 1000
    beat = reporting(lock, token) if hasattr(lock, "heartbeat") else None
    held[token] = (lock, coord, beat)
    if lease_ms != req["lease_ms"]:
        return answer(req, "ok", token=token, lease_ms=lease_ms)
    return answer(req, "ok", token=token)


def disconnected(coord):
    return args.driver == "zookeeper" and not coord._coord.connected


def release(req):
    try:
        with beating:
            lock, coord, _ = held.pop(req["token"])
            owner = lock.is_still_owner() if args.careful and args.driver != "etcd3gw" else True
            released = lock.release()  # False: redis, etcd3gw found another token; zookeeper: never
    except Exception as e:
        return answer(req, "info", reason=repr(e))
    if not owner and disconnected(coord):
        return answer(req, "info", reason="is_still_owner() said no while the session was disconnected")
    if released and owner:
        return answer(req, "ok")
    return answer(req, "fail", reason="not-held")


def renew(req):
    lock, coord, beat = held[req["token"]]
    try:
        with beating:
            ok = beat() if beat else lock.is_still_owner()
    except Exception as e:
        if lost(e):
            return answer(req, "fail", reason="not-held")
        return answer(req, "info", reason=repr(e))
    if ok:
        return answer(req, "ok")
    if disconnected(coord):
        return answer(req, "info", reason="is_still_owner() said no while the session was disconnected")
    return answer(req, "fail", reason="not-held")


def handle(req):
    global init, name, key, client_name
    kind = req.get("type")
    if kind == "init":
        init, name, client_name = req, req["lock"].encode("ascii"), req.get("client_name", "")
        coord, _ = coordinator(req.get("lease_ms", 10000))
        lock = coord.get_lock(name)
        key = {"redis": lambda: lock.name, "zookeeper": lambda: lock._lock.path,
               "etcd3gw": lambda: lock._key.decode()}[args.driver]()
        return answer(req, "hello", name="tooz-lock", version="1", fencing=False, renewal=args.careful,
                   library="tooz %s %s" % (metadata.version("tooz"), args.driver), key=key)
    if kind == "acquire" and req.get("lease_ms"):
        return acquire(req)
    if kind == "release" and req.get("token") in held:
        return release(req)
    if kind == "renew" and args.careful and req.get("token") in held:
        return renew(req)
    refuse(req)


logging.getLogger("tooz").setLevel(logging.ERROR)  # the heart's retries: the reports have them
logging.getLogger("kazoo").setLevel(logging.ERROR)
serve(handle)
stopping = threading.Thread(target=lambda: [c.stop() for c in coords.values()], daemon=True)
stopping.start()  # releases what is held, stops the heart; bounded: it must exit soon
stopping.join(1.5)
sys.stdout.flush()
os._exit(0)
