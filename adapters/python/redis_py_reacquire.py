#!/usr/bin/python3
"""A hiatus lock adapter for redis-py's Lock(timeout=0), renewed by
reacquire() (docs/checkers.md, the false ok): redis-py #4279. A Lock with
timeout 0 holds until it is released (SET NX, no PX); its reacquire() sends
PEXPIRE key 0, which deletes the key, and says it renewed. Debian's
python3-redis 4.3.4 has it (as redis-py 8.1.0 still does).

    hiatus run --lock exec:adapters/python/redis_py_reacquire.py --extend-before-write

Each renew (hiatus's watchdog's, and the ask before each write) is one
reacquire(), answered ok when it returns True, as a careful caller reads
it; its release is release(), not-held when redis-py says the lock is not
its own.
"""
import redis
from redis.exceptions import LockError, LockNotOwnedError, RedisError

from protocol import answer, refuse, serve

client = None
held = {}  # token -> the Lock object that holds it


def acquire(req):
    lock = client.lock(req["lock"], timeout=0, sleep=0.005, thread_local=False)
    try:
        got = lock.acquire(blocking=True, blocking_timeout=req.get("wait_ms", 0) / 1000)
    except RedisError as e:  # the SET may have reached the server
        return answer(req, "info", reason=str(e))
    if not got:
        return answer(req, "fail", reason="busy")
    token = lock.local.token.decode()
    held[token] = lock
    answer(req, "ok", token=token)


def held_call(req, call):
    lock = held.get(req.get("token"))
    if lock is None:
        return answer(req, "fail", reason="not-held")
    try:
        done = call(lock)
    except LockNotOwnedError:
        return answer(req, "fail", reason="not-held")
    except (LockError, RedisError) as e:
        return answer(req, "info", reason=str(e))
    return answer(req, "ok") if done is not False else answer(req, "fail", reason="not-held")


def handle(req):
    global client
    kind = req.get("type")
    if kind == "init":
        client = redis.Redis.from_url(req["redis_url"], client_name=req.get("client_name") or None)
        return answer(req, "hello", name="redis-py-reacquire", version="1", fencing=False, renewal=True,
                      library="redis-py %s Lock(timeout=0)" % redis.__version__)
    if kind == "acquire":
        return acquire(req)
    if kind == "renew":
        return held_call(req, lambda lock: lock.reacquire())
    if kind == "release":
        held_call(req, lambda lock: lock.release())
        held.pop(req.get("token"), None)
        return
    refuse(req)


serve(handle)
