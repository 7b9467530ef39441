"""Which of a step's launches a call is, the same in every attempt of the step: what a retry
reattaches by when one step launches several apps (``AnylaunchResource.run`` called in a
loop or from threads).

A call's slot is a digest of its request (the app as the step built it) and how many calls
of the same attempt made that request before it. A retry that makes the same requests finds
each one's app whatever order its threads run in (equal requests are interchangeable); a
request that differs between attempts (a timestamp in its args, say) finds none and is
launched anew, as if nothing had been recorded.

>>> from anylaunch.specs import AppDef, Role
>>> app = AppDef("train", [Role("main", image=".", entrypoint="echo", args=["1"])])
>>> slots = CallSlots()
>>> first, again = slots.take(("run-1", "step", 0), app), slots.take(("run-1", "step", 0), app)
>>> first.endswith(".0"), again.endswith(".1"), first[:-2] == again[:-2]
(True, True, True)
>>> slots.take(("run-1", "step", 1), app) == first  # the next attempt starts over
True
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter, OrderedDict

from anylaunch.specs.api import AppDef
from anylaunch.specs.serialize import appdef_to_dict

#: (run id, step key, retry number): one attempt of one step
Attempt = tuple[str, str, int]
#: how many attempts' counts a process keeps (a long-lived process runs many steps)
_KEPT_ATTEMPTS = 1024


def request_digest(app: AppDef) -> str:
    """A short digest of the request ``app`` is (its plain-data form, secret values masked:
    the digest is in run tags).

    >>> from anylaunch.specs import AppDef, Role
    >>> len(request_digest(AppDef("a", [Role("r", image=".", entrypoint="echo")])))
    12
    """
    plain = json.dumps(appdef_to_dict(app, mask_secrets=True), sort_keys=True, default=str)
    return hashlib.sha256(plain.encode()).hexdigest()[:12]


class CallSlots:
    """Hands each call of an attempt its slot (thread-safe)."""

    def __init__(self) -> None:
        self._counts: OrderedDict[Attempt, Counter[str]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, attempt: Attempt, app: AppDef) -> str:
        """The slot of the next call of ``attempt`` that requests ``app``:
        ``<digest>.<k>``."""
        digest = request_digest(app)
        with self._lock:
            counts = self._counts.get(attempt)
            if counts is None:
                counts = self._counts[attempt] = Counter()
                while len(self._counts) > _KEPT_ATTEMPTS:
                    self._counts.popitem(last=False)
            k = counts[digest]
            counts[digest] += 1
        return f"{digest}.{k}"


#: the process's slots (every step of every run this process executes)
CALL_SLOTS = CallSlots()
