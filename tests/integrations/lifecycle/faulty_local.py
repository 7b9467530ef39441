"""``faulty_local``: local_cwd behind a status API that fails on cue, registered the way a
third-party scheduler is (an ``anylaunch.schedulers`` entry point, see :mod:`.plugin`).

The apps are real local_cwd processes. Only the status calls (``describe``,
``describe_many``) are faulted, the way a flaky or unreachable status endpoint fails its
client; cancel, delete and logs reach the real backend through a control path that keeps
working, so a test can tell that the engine cancelled an app it gave up on.

The faults are in a text file named by ``$ANYLAUNCH_TEST_FAULTS``, one rule a line, read (and
counted down) before every status call::

    <target> errors <N>        the next N status calls raise ConnectionError, then they work
    <target> down              every status call raises ConnectionError, for good
    <target> down after <N>    N status calls work, then every later one raises

``<target>`` is an app name (the app id without its random suffix) or ``*`` for every app; an
app's own rule wins over ``*``. Blank lines and ``#`` comments are ignored.

>>> rules = parse_rules("# flaky\\nmatrix-x errors 2\\n* down after 1\\n")
>>> [r.line() for r in rules]
['matrix-x errors 2', '* down after 1']
>>> rule_for(rules, "matrix-x").line(), rule_for(rules, "other").line()
('matrix-x errors 2', '* down after 1')
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from anylaunch.schedulers.api import DescribeAppResponse
from anylaunch.schedulers.local_scheduler import LocalScheduler

#: The scheduler's name (and its entry point's).
BACKEND = "faulty_local"
#: The environment variable naming the fault file.
FAULTS_ENV = "ANYLAUNCH_TEST_FAULTS"
#: The text every injected error carries (engines log it; tests look for it).
INJECTED = "(injected fault)"
EVERY_APP = "*"


@dataclass
class Rule:
    """One fault: ``errors`` (``count`` failures left, then recovery) or ``down``
    (``count`` good calls left, then failing for good)."""

    target: str
    kind: Literal["errors", "down"]
    count: int = 0

    def line(self) -> str:
        """The rule as a line of the fault file.

        >>> Rule("a", "down").line(), Rule("*", "down", 3).line(), Rule("a", "errors", 1).line()
        ('a down', '* down after 3', 'a errors 1')
        """
        if self.kind == "errors":
            return f"{self.target} errors {self.count}"
        return f"{self.target} down" + (f" after {self.count}" if self.count else "")

    def fire(self, app_id: str) -> None:
        """Counts one status call down; raises ConnectionError if this one fails."""
        if self.kind == "errors" and self.count > 0:
            self.count -= 1
            raise ConnectionError(f"status API of {app_id}: connection refused {INJECTED}")
        if self.kind == "down":
            if self.count > 0:
                self.count -= 1
                return
            raise ConnectionError(f"status API of {app_id}: host unreachable {INJECTED}")


def parse_rules(text: str) -> list[Rule]:
    """The rules of a fault file.

    Raises:
        ValueError: a line is not a rule (the message quotes it)

    >>> parse_rules("a down after x")
    Traceback (most recent call last):
    ...
    ValueError: not a fault rule: 'a down after x' (use '<app name or *> errors N', ...)
    """
    rules = []
    for raw in text.splitlines():
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) == 3 and words[1] == "errors" and words[2].isdigit():
            rules.append(Rule(words[0], "errors", int(words[2])))
        elif len(words) == 2 and words[1] == "down":
            rules.append(Rule(words[0], "down"))
        elif len(words) == 4 and words[1:3] == ["down", "after"] and words[3].isdigit():
            rules.append(Rule(words[0], "down", int(words[3])))
        else:
            raise ValueError(
                f"not a fault rule: {raw!r} (use '<app name or *> errors N', "
                "'<app name or *> down' or '<app name or *> down after N')"
            )
    return rules


def rule_for(rules: Sequence[Rule], app_name: str) -> Rule | None:
    """The rule that applies to ``app_name``: its own, else the ``*`` one, else None."""
    own = [r for r in rules if r.target == app_name]
    every = [r for r in rules if r.target == EVERY_APP]
    found = own or every
    return found[0] if found else None


def app_name_of(app_id: str) -> str:
    """The app name of a local_cwd app id (``{name}-{8 random characters}``).

    >>> app_name_of("matrix-backend-gone-ab12cd34")
    'matrix-backend-gone'
    """
    return app_id.rsplit("-", 1)[0]


@contextlib.contextmanager
def status_api(path: str | None = None) -> Iterator[list[Rule]]:
    """The fault rules, held under an exclusive lock of the fault file (and written back, with
    their counts, when the block ends, also if it raised). Status calls hold it while they run,
    so a test holding it can change the backend with no status call in between.

    Yields no rules (and locks nothing) when no fault file is set.
    """
    path = path or os.environ.get(FAULTS_ENV)
    if not path or not os.path.exists(path):
        yield []
        return
    with open(path, "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes
        rules = parse_rules(f.read())
        before = [r.line() for r in rules]
        try:
            yield rules
        finally:
            after = [r.line() for r in rules]
            if after != before:
                f.seek(0)
                f.truncate()
                f.write("".join(f"{line}\n" for line in after))


def write_rules(path: str | os.PathLike[str], rules: Sequence[str]) -> None:
    """Writes a fault file (each rule checked first)."""
    text = "".join(f"{rule}\n" for rule in rules)
    parse_rules(text)
    with open(path, "w") as f:
        f.write(text)


def read_rules(path: str | os.PathLike[str]) -> list[str]:
    """The rules of a fault file as lines, with their counts as they are now."""
    with status_api(os.fspath(path)) as rules:
        return [r.line() for r in rules]


class FaultyLocalScheduler(LocalScheduler):
    """local_cwd whose status calls fail as the fault file says."""

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__(session_name, state_dir=kwargs.get("state_dir"))
        self.backend = BACKEND
        # set inside cancel/delete (per thread: engines poll while another thread cancels)
        self._control = threading.local()

    def _in_control_path(self) -> bool:
        return bool(getattr(self._control, "active", False))

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        if self._in_control_path():
            return super().describe(app_id)
        with status_api() as rules:
            rule = rule_for(rules, app_name_of(app_id))
            if rule is not None:
                rule.fire(app_id)
            return super().describe(app_id)

    def describe_many(self, app_ids: Sequence[str]) -> dict[str, DescribeAppResponse | None]:
        return {app_id: self.describe(app_id) for app_id in app_ids}

    @contextlib.contextmanager
    def _control_path(self) -> Iterator[None]:
        self._control.active = True
        try:
            yield
        finally:
            self._control.active = False

    def cancel(self, app_id: str) -> None:
        with self._control_path():
            super().cancel(app_id)

    def delete(self, app_id: str) -> None:
        with self._control_path():
            super().delete(app_id)


def create_scheduler(session_name: str, **kwargs: Any) -> FaultyLocalScheduler:
    """The entry point's factory (``state_dir`` as for local_cwd)."""
    return FaultyLocalScheduler(session_name, **kwargs)
