"""Exceptions raised by anylaunch on bad input, unknown apps and failed apps.

Every error that comes from a user's input names the field, the offending value and the fix,
so it reads as one line at a terminal and in an orchestrator's task log.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class AnylaunchError(Exception):
    """Base class of every error anylaunch raises on purpose."""


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Returns a ``" Did you mean 'x'?"`` hint for the closest of ``choices``, or ``""``.

    >>> did_you_mean("cpu.smal", ["cpu.small", "gpu.large"])
    " Did you mean 'cpu.small'?"
    >>> did_you_mean("zzz", ["cpu.small"])
    ''
    """
    import difflib  # only needed on the error path

    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" Did you mean '{matches[0]}'?" if matches else ""


class InvalidSpecError(AnylaunchError, ValueError):
    """A field of a job spec holds a value that cannot work.

    >>> err = InvalidSpecError("Role.num_replicas", 0, "must be at least 1", "set num_replicas >= 1")
    >>> str(err)
    'Role.num_replicas=0 is invalid: must be at least 1. Fix: set num_replicas >= 1'
    >>> err.field, err.value
    ('Role.num_replicas', 0)
    """

    def __init__(self, field: str, value: Any, problem: str, fix: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        self.fix = fix
        end = "" if problem.endswith(("?", ".", "!")) else "."  # a did-you-mean ends it
        super().__init__(f"{field}={value!r} is invalid: {problem}{end} Fix: {fix}")


class InvalidRunConfigException(InvalidSpecError):
    """A scheduler run config (cfg) is missing a required option, has an unknown option or
    holds a value of the wrong type."""


class MalformedAppHandleException(InvalidSpecError):
    """An app handle is not of the form ``{scheduler}://{session_name}/{app_id}``."""

    def __init__(self, app_handle: str) -> None:
        super().__init__(
            "app_handle",
            app_handle,
            "not of the form {scheduler}://{session_name}/{app_id}",
            "pass the handle exactly as `anylaunch run` or Runner.run returned it, "
            "e.g. local_cwd://default/echo-x1y2z3",
        )


class UnknownAppException(AnylaunchError, LookupError):
    """The scheduler does not know the app (it never existed or has been purged)."""

    def __init__(self, app_handle: str) -> None:
        self.app_handle = app_handle
        super().__init__(
            f"unknown app {app_handle!r}: the scheduler has no record of it. "
            "Fix: check the handle (`anylaunch list -s SCHEDULER` lists known apps); "
            "finished apps may have been purged by the scheduler"
        )


class UnknownSchedulerException(AnylaunchError, ValueError):
    """No scheduler is registered under the requested name."""

    def __init__(self, scheduler: str, known: Iterable[str] = ()) -> None:
        known = sorted(known)
        self.scheduler = scheduler
        super().__init__(
            f"unknown scheduler {scheduler!r}.{did_you_mean(scheduler, known)} "
            f"Fix: use one of {', '.join(known) or '(none registered)'}, or register a scheduler "
            "(@anylaunch.plugins.register.scheduler() in an anylaunch_plugins.schedulers "
            "module, or the 'anylaunch.schedulers' entry-point group)"
        )


class SchedulerUnavailableError(AnylaunchError):
    """A registered scheduler could not be loaded (not built yet, or its plugin is broken)."""


class BackendUnreachableError(AnylaunchError, ConnectionError):
    """The scheduler's backend could not be asked (no cluster configured, controller down,
    daemon not running, endpoint unreachable): nothing is known about the app either way.

    Distinct from :class:`UnknownAppException`, where the backend answered that it has no such
    app. A watcher treats it as a poll error (retried), never as the app's end.

    >>> err = BackendUnreachableError("slurm", "slurmctld did not answer", "run `scontrol ping`")
    >>> str(err)
    'cannot reach the slurm backend: slurmctld did not answer. Fix: run `scontrol ping`'
    >>> isinstance(err, ConnectionError), err.scheduler
    (True, 'slurm')
    """

    def __init__(self, scheduler: str, problem: str, fix: str) -> None:
        self.scheduler = scheduler
        self.problem = problem
        self.fix = fix
        super().__init__(f"cannot reach the {scheduler} backend: {problem}. Fix: {fix}")
