"""The lock adapter protocol's loop for the Python adapters (docs/adapter-protocol.md):
one JSON request a line on stdin, one answer a line on stdout, in order.
As adapters/node/protocol.js is the Node adapters'.
"""
import json
import sys
import threading

_out = threading.Lock()  # a line at a time: a library's thread may report while an answer is written


def _write(fields):
    with _out:
        sys.stdout.write(json.dumps(fields) + "\n")
        sys.stdout.flush()


def answer(req, kind, **fields):
    """Writes the answer of the kind to req, with fields."""
    fields.update(type=kind, in_reply_to=req.get("id"))
    _write(fields)


def report(**fields):
    """Writes a line of the adapter's own accord, answering no request: a renewal its library makes
    on its own, begun or answered (type renewing or renewed)."""
    _write(fields)


def refuse(req):
    """Answers error to a request the adapter cannot do."""
    answer(req, "error", reason="cannot do %r with the fields %s" % (req.get("type"), sorted(req)))


def serve(handle):
    """Calls handle with each request until stdin closes."""
    for line in sys.stdin:
        handle(json.loads(line))
