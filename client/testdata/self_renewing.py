"""A lock adapter whose lock renews itself, and reports each renewal
(docs/adapter-protocol.md, "Renewals of the library's own"): SET NX PX,
a thread per grant renewing it every lease/3 with a compare-and-PEXPIRE
until it is refused, and a compare-and-delete release. Its hello says
renewal: false: hiatus sends it no renew request. For client's tests."""
import json
import sys
import threading
import time

import redis

RENEW = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0"
RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
out = threading.Lock()
client = None
lease = 0
held = {}  # token -> the event that stops its renewals
count = [0]


def say(**fields):
    with out:
        sys.stdout.write(json.dumps(fields) + "\n")
        sys.stdout.flush()


def renew(key, token, stop):
    while not stop.wait(lease / 3000):
        with out:
            count[0] += 1
            n = count[0]
        say(type="renewing", renewal=n, token=token)
        try:
            ok = client.eval(RENEW, 1, key, token, lease)
        except redis.RedisError as e:
            say(type="renewed", renewal=n, result="info", reason=str(e))
            continue
        if ok != 1:
            say(type="renewed", renewal=n, result="fail", reason="not-held")
            return
        say(type="renewed", renewal=n, result="ok")


def acquire(req):
    token = "t%d" % time.monotonic_ns()
    deadline = time.monotonic() + req["wait_ms"] / 1000
    while not client.set(req["lock"], token, nx=True, px=req["lease_ms"]):
        if time.monotonic() > deadline:
            return say(type="fail", in_reply_to=req["id"], reason="busy")
        time.sleep(0.002)
    held[token] = threading.Event()
    threading.Thread(target=renew, args=(req["lock"], token, held[token]), daemon=True).start()
    say(type="ok", in_reply_to=req["id"], token=token)


for line in sys.stdin:
    req = json.loads(line)
    if req["type"] == "init":
        client, lease = redis.Redis.from_url(req["redis_url"]), req["lease_ms"]
        say(type="hello", in_reply_to=req["id"], name="self-renewing", version="1", library="redis-py " + redis.__version__)
    elif req["type"] == "acquire":
        acquire(req)
    elif req["type"] == "release" and req.get("token") in held:
        held.pop(req["token"]).set()
        gone = client.eval(RELEASE, 1, req["lock"], req["token"]) != 1
        say(type="fail", in_reply_to=req["id"], reason="not-held") if gone else say(type="ok", in_reply_to=req["id"])
    else:
        say(type="error", in_reply_to=req["id"], reason="cannot do %r" % req["type"])
