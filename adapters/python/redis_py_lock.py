#!/usr/bin/python3
"""A hiatus lock adapter for redis-py's redis.lock.Lock (docs/adapter-protocol.md).

Debian's python3-redis lives in /usr/bin/python3, hence the interpreter above.
    hiatus run --lock exec:adapters/python/redis_py_lock.py
"""
import redis
from redis.exceptions import LockError, LockNotOwnedError, RedisError

from protocol import answer, refuse, serve

client = None
held = {}  # token -> the Lock object that holds it


def handle(req):
    global client
    kind = req.get("type")
    if kind == "init":
        # client_name: the worker's, which the lock server's record names.
        client = redis.Redis.from_url(req["redis_url"], client_name=req.get("client_name") or None)
        return answer(req, "hello", name="redis-py-lock", version="1", fencing=False, renewal=False,
                      library="redis-py " + redis.__version__)
    if kind == "acquire" and req.get("lease_ms"):
        lock = client.lock(req["lock"], timeout=req["lease_ms"] / 1000, sleep=0.005, thread_local=False)
        try:
            got = lock.acquire(blocking=True, blocking_timeout=req.get("wait_ms", 0) / 1000)
        except RedisError as e:  # the SET may have reached the server
            return answer(req, "info", reason=str(e))
        if not got:
            return answer(req, "fail", reason="busy")
        token = lock.local.token.decode()
        held[token] = lock
        return answer(req, "ok", token=token)
    if kind == "release" and req.get("token") in held:
        lock = held.pop(req["token"])
        try:
            lock.release()
        except LockNotOwnedError:  # its lease had expired: redis-py cannot tell who holds it now
            return answer(req, "fail", reason="not-held")
        except (LockError, RedisError) as e:
            return answer(req, "info", reason=str(e))
        return answer(req, "ok")
    refuse(req)


serve(handle)
