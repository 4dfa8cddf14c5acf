"""What the Python client scripts of the compatibility matrix share.

Each script prints one line per capability it was asked for:

    COMPAT {"cap": "...", "status": "pass|fail|n/a", "detail": "...", ...}

plus one {"client": ..., "version": ...} line. Extra fields are claims the
Go runner checks against the agent: "topic" with "produced" (the topic
holds exactly that many records), "codec" (its stored batches use that
codec), "idempotent" (they carry a producer id), "group" with "committed"
(the group's committed offsets on the topic add up to that),
"txn_committed" (a read_committed consumer sees that many records).
"""

import argparse
import json
import sys
import time
import traceback


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--caps", required=True, help="comma-separated capabilities to check")
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--timeout-s", type=float, default=60.0)
    args = ap.parse_args()
    args.caps = [c for c in args.caps.split(",") if c]
    return args


def emit(obj):
    sys.stdout.write("COMPAT " + json.dumps(obj, sort_keys=True) + "\n")
    sys.stdout.flush()


def result(cap, status, detail, **claims):
    obj = {"cap": cap, "status": status, "detail": detail}
    obj.update(claims)
    emit(obj)


def client(name, version):
    emit({"client": name, "version": version})


def note(text):
    emit({"note": text})


def check(cap, fn):
    """Runs fn, which returns (detail, claims) on success or raises; prints
    the result line. An exception is a failure whose detail is the error,
    with the traceback on stderr."""
    try:
        detail, claims = fn()
    except NotApplicable as e:
        result(cap, "n/a", str(e))
        return False
    except Exception as e:  # every failure becomes the cell's detail
        traceback.print_exc(file=sys.stderr)
        result(cap, "fail", "%s: %s" % (type(e).__name__, e))
        return False
    result(cap, "pass", detail, **claims)
    return True


class NotApplicable(Exception):
    """The client has no such feature, or cannot use it here."""


class CheckFailed(Exception):
    """A check saw something other than what it wanted."""


def messages(n, tag, keys=10):
    """n (key, value) byte pairs, keys spread over `keys` values."""
    pad = "x" * 40
    return [(("k%02d" % (i % keys)).encode(), ("%s-%06d-%s" % (tag, i, pad)).encode()) for i in range(n)]


def compare(sent, got):
    """sent: [(key, value)] in produce order; got: [(partition, offset,
    key, value)]. Checks every record came back once, each key stayed in
    one partition, and each partition kept produce order."""
    if len(got) != len(sent):
        raise CheckFailed("read %d records, produced %d" % (len(got), len(sent)))
    by_part = {}
    key_part = {}
    for p, o, k, v in got:
        by_part.setdefault(p, []).append((o, k, v))
        if key_part.setdefault(k, p) != p:
            raise CheckFailed("key %r in partitions %d and %d" % (k, key_part[k], p))
    want = {}
    for k, v in sent:
        if k not in key_part:
            raise CheckFailed("key %r never read" % k)
        want.setdefault(key_part[k], []).append(v)
    for p, recs in by_part.items():
        recs.sort()
        vals = [v for _, _, v in recs]
        if vals != want.get(p, []):
            raise CheckFailed("partition %d: values not as produced (first %r, want %r)" % (p, vals[:1], want.get(p, [])[:1]))


class Deadline:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return max(0.0, self.end - time.monotonic())

    def passed(self):
        return time.monotonic() >= self.end
