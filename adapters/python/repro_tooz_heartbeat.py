#!/usr/bin/python3
"""A reproduction, without hiatus, of tooz's etcd3gw lock saying it is still held after etcd
expired it (docs/findings.md, "tooz's etcd3gw lock: heartbeat() says held after the lease
expired"). Debian's python3-tooz 3.1.0 and python3-etcd3gw 2.0.0, against an etcd 3.4 server:

    adapters/python/repro_tooz_heartbeat.py http://127.0.0.1:2379

Client A takes the lock, then stalls longer than its lock's lease (a GC pause, a frozen VM: here
A's heart is not started, and A sleeps); etcd expires the lease and deletes the key; client B
takes the lock. A then asks its lock, as a careful holder does before a write: heartbeat() says
True, and nothing else in tooz's API says otherwise. Exit status 1 when A was told it holds the
lock while B held it.
"""
import inspect
import sys
import time
import uuid
from urllib.parse import urlsplit

import etcd3gw
from tooz import coordination

if "api_path" not in inspect.signature(etcd3gw.client).parameters:
    # tooz 3.1.0 passes api_path, which etcd3gw 2.0.0's client() lacks (2.1.0 has it).
    def client_with_api_path(api_path="/v3alpha/", **kwargs):
        return etcd3gw.Etcd3Client(api_path=api_path, **kwargs)
    etcd3gw.client = client_with_api_path

u = urlsplit(sys.argv[1])
url = "etcd3+%s://%s?api_version=v3&lock_timeout=2" % (u.scheme, u.netloc)
name = ("repro-%s" % uuid.uuid4().hex).encode()


def coordinator(member):
    c = coordination.get_coordinator(url, member)
    c.start(start_heart=False)  # A's heart would stall with A
    return c


a, b = coordinator(b"a"), coordinator(b"b")
lock_a = a.get_lock(name)
print("A acquire:", lock_a.acquire(blocking=False))
time.sleep(5)  # A stalls past its 2 s lease; etcd revokes it within a second or so of its TTL
lock_b = b.get_lock(name)
print("B acquire (after A's lease expired):", lock_b.acquire(blocking=False))
told = lock_a.heartbeat()
print("A heartbeat() (B holds the lock):", told)
print("A release:", lock_a.release())
lock_b.release()
a.stop()
b.stop()
sys.exit(1 if told else 0)
