#!/usr/bin/python3
"""A hiatus lock adapter whose fencing token is an INCR taken apart from its
grant (docs/checkers.md, the fence inversion): SET NX PX, then INCR of a
fence counter, a second command, with a pause between the two in every
Nth grant, as a GC pause or a descheduled thread would make one. A grant
whose pause outlasts its lease takes its token after a later holder's.

    adapters/python/incr_after_set.py PAUSE_MS EVERY
    hiatus run --lock 'exec:adapters/python/incr_after_set.py 600 2' --lease 300ms --fenced

It is no library's: it is the pattern (redis-py's Lock, then client.incr)
written plainly, with redis-py (Debian's python3-redis).
"""
import sys
import time
import uuid

import redis
from redis.exceptions import RedisError

from protocol import answer, refuse, serve

RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"

pause_ms, every = int(sys.argv[1]), int(sys.argv[2])
client = None
retry = 0.005
grants = 0


def acquire(req):
    global grants
    lock, deadline = req["lock"], time.monotonic() + req.get("wait_ms", 0) / 1000
    token = uuid.uuid4().hex
    while True:
        try:
            got = client.set(lock, token, nx=True, px=req["lease_ms"])
        except RedisError as e:  # the SET may have reached the server
            return answer(req, "info", reason=str(e))
        if got:
            break
        if time.monotonic() >= deadline:
            return answer(req, "fail", reason="busy")
        time.sleep(retry)
    grants += 1
    if every > 0 and grants % every == 0:
        time.sleep(pause_ms / 1000)  # between the grant and its token
    try:
        fence = client.incr(lock + ":fence")
    except RedisError as e:
        return answer(req, "info", reason=str(e))
    answer(req, "ok", token=token, fence=fence)


def handle(req):
    global client, retry
    kind = req.get("type")
    if kind == "init":
        client = redis.Redis.from_url(req["redis_url"], client_name=req.get("client_name") or None)
        retry = max(req.get("retry_ms", 5), 1) / 1000
        return answer(req, "hello", name="incr-after-set", version="1", fencing=True, renewal=False,
                      library="redis-py %s, SET NX then INCR, %d ms apart every %d grants" % (redis.__version__, pause_ms, every))
    if kind == "acquire" and req.get("lease_ms"):
        return acquire(req)
    if kind == "release" and req.get("token"):
        try:
            n = client.eval(RELEASE, 1, req["lock"], req["token"])
        except RedisError as e:
            return answer(req, "info", reason=str(e))
        return answer(req, "ok") if n else answer(req, "fail", reason="not-held")
    refuse(req)


serve(handle)
