"""The lock adapter protocol's loop for the Python adapters (docs/adapter-protocol.md):
one JSON request a line on stdin, one answer a line on stdout, in order.
As adapters/node/protocol.js is the Node adapters'.
"""
import json
import sys


def answer(req, kind, **fields):
    """Writes the answer of the kind to req, with fields."""
    fields.update(type=kind, in_reply_to=req.get("id"))
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def refuse(req):
    """Answers error to a request the adapter cannot do."""
    answer(req, "error", reason="cannot do %r with the fields %s" % (req.get("type"), sorted(req)))


def serve(handle):
    """Calls handle with each request until stdin closes."""
    for line in sys.stdin:
        handle(json.loads(line))
