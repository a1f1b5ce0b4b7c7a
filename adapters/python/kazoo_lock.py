#!/usr/bin/python3
"""A hiatus lock adapter for kazoo's ZooKeeper Lock recipe (docs/adapter-protocol.md).

Debian's python3-kazoo lives in /usr/bin/python3, hence the interpreter above.
    hiatus run --lock exec:adapters/python/kazoo_lock.py --adapter-store zookeeper
One session a process, its timeout the lease; fenced by the znode's czxid. kazoo's release
hides a znode its expired session lost: the release deletes it itself first.
"""
import logging

import kazoo
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, LockTimeout, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from protocol import answer, refuse, serve

client = None
held = {}  # token (the znode's path) -> the Lock that holds it
client_name = ""  # init's: the worker's name, said for each session
named = set()  # the sessions whose name is said


def path(name):
    return "/hiatus/" + name.replace("/", "_")


def announce(name):
    """Say whose the session is, beside the lock's znode (hiatus's client.ZooKeeperClientPath),
    before the session creates a znode of the lock's: the lock server's record names its znodes so."""
    session = client.client_id[0] if client.client_id else None
    if not client_name or session is None or session in named:
        return
    try:
        client.create("%s-clients/%x" % (path(name), session), client_name.encode(), ephemeral=True, makepath=True)
    except NodeExistsError:
        pass
    named.add(session)


def acquire(req):
    lock = client.Lock(path(req["lock"]))
    try:
        announce(req["lock"])
        got = lock.acquire(blocking=True, timeout=req.get("wait_ms", 0) / 1000)
    except LockTimeout:  # it gave up, and deleted its znode
        got = False
    except (KazooException, KazooTimeoutError) as e:  # the znode may have been created
        return answer(req, "info", reason=repr(e))
    if not got:
        return answer(req, "fail", reason="busy")
    token = lock.path + "/" + lock.node
    stat = client.exists(token)
    if stat is None or stat.ephemeralOwner != client.client_id[0]:  # the session ended
        try:
            lock.release()
        except (KazooException, KazooTimeoutError):
            pass  # the session's end removed its znode
        return answer(req, "info", reason="the session ended before the fence was read")
    held[token] = lock
    return answer(req, "ok", token=token, fence=stat.czxid)


def release(req):
    lock = held.pop(req["token"])
    try:
        client.delete(req["token"])
    except NoNodeError:  # its session expired: the server deleted it
        lock.release()
        return answer(req, "fail", reason="stolen" if client.get_children(lock.path) else "not-held")
    except (KazooException, KazooTimeoutError) as e:
        return answer(req, "info", reason=repr(e))
    lock.release()
    return answer(req, "ok")


def handle(req):
    global client, client_name
    kind = req.get("type")
    if kind == "init":
        client = KazooClient(hosts=req["zookeeper"], timeout=max(req.get("lease_ms", 10000), 200) / 1000)
        client.start(timeout=10)
        client_name = req.get("client_name", "")
        return answer(req, "hello", name="kazoo-lock", version="1", fencing=True, renewal=False,
                      library="kazoo " + kazoo.__version__)
    if kind == "acquire":
        return acquire(req)
    if kind == "release" and req.get("token") in held:
        return release(req)
    refuse(req)


logging.getLogger("kazoo").setLevel(logging.ERROR)  # a reconnect's warnings: the history has them
serve(handle)
if client is not None:
    client.stop()
