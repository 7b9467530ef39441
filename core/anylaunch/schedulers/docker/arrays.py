"""Job arrays on ``local_docker``: one app, one container per index, at most K running.

An array app's containers are ``{app_id}-{role}-{index}``, one per selected index, each with
its role resolved client-side (:func:`~anylaunch.specs.arrays.resolve_index`) and labelled
with the array's facts (:func:`~anylaunch.schedulers.common.arrays.array_meta`) and its
limit. ``schedule`` creates them all, starts the first K and hands the rest to the array's
**runner**: a small detached process (``python -m anylaunch.schedulers.docker.arrays HOST
APP_ID``, its own session, so it outlives the launcher) that starts the next created
container, in index order, as one ends, and exits once none is left or a cancel is recorded.
It is the only process that starts indices, so racing describers can never run more than K;
it records itself (pid, start time, host) as an event container, so any process on its host
can tell when it died: indices it left unstarted are then FAILED.

Describe reads one container list (one engine call, whatever the size) and builds the status
by the array rule (:func:`~anylaunch.schedulers.common.arrays.array_response`); it never
restarts or stops anything of an array. Cancel records the cancel event and stops the live
indices; the runner checks the event before each start and again after it (stopping what it
started), so a pending index never runs after a cancel. The full array spec (size, limit,
ratio, a sweep's parameters) is a label of the app's network: ``retry`` rebuilds the same
definition from it and from an index container (its role, env and host options).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from anylaunch.schedulers.api import DescribeAppResponse
from anylaunch.schedulers.common.arrays import (
    IndexFacts,
    array_meta,
    array_response,
    read_array_meta,
)
from anylaunch.schedulers.common.job_metadata import JOB_METADATA_KEYS
from anylaunch.schedulers.common.processes import is_alive, process_start_time
from anylaunch.schedulers.common.roles import RANK0_ENV
from anylaunch.schedulers.docker.request import (
    _KIND_EVENT,
    _KIND_REPLICA,
    LABEL_APP_ID,
    LABEL_APP_NAME,
    LABEL_CANCEL_GRACE,
    LABEL_SESSION,
    DockerAppRequest,
    DockerOpts,
    DockerSchedulerError,
    _describe_exit,
)
from anylaunch.schedulers.docker.state import _Container, role_of
from anylaunch.specs.api import NONE, AppDef, AppState
from anylaunch.specs.arrays import ARRAY_INDEX_ENV, ArraySpec, retry_spec
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.serialize import arrayspec_from_dict, arrayspec_to_dict

__all__ = [
    "LABEL_ARRAY",
    "LABEL_ARRAY_LIMIT",
    "LABEL_ARRAY_SPEC",
    "array_labels",
    "describe_array",
    "is_array",
    "retry_app",
    "spec_label",
    "start_runner",
]

log: logging.Logger = logging.getLogger(__name__)

#: on every index container: :func:`array_meta` of the array
LABEL_ARRAY = "anylaunch.array"
#: on every index container: how many indices may run at once
LABEL_ARRAY_LIMIT = "anylaunch.array-limit"
#: on the app's network: the whole spec (JSON), what a retry rebuilds the array from
LABEL_ARRAY_SPEC = "anylaunch.array-spec"

_RUNNER_EVENT = "array-runner"
_START_FAILED_EVENT = "array-start-failed"
_STOP_EXITS = (128 + 9, 128 + 15)  # SIGKILL / SIGTERM: how a cancel's stop ends a container


def array_labels(array: ArraySpec) -> dict[str, str]:
    """The labels every index container of ``array`` carries.

    >>> array_labels(ArraySpec(20, parallelism=4))
    {'anylaunch.array': 'size=20;ratio=1.0', 'anylaunch.array-limit': '4'}
    """
    return {LABEL_ARRAY: array_meta(array), LABEL_ARRAY_LIMIT: str(array.limit)}


def spec_label(array: ArraySpec) -> str:
    """The network's label holding the whole spec (JSON).

    >>> spec_label(ArraySpec(3, parallelism=1, indices=[2]))
    '{"indices": [2], "min_success_ratio": 1.0, "parallelism": 1, "params": [], "size": 3}'
    """
    return json.dumps(arrayspec_to_dict(array), sort_keys=True)


def is_array(containers: Sequence[_Container]) -> bool:
    """True when the app's containers are an array's."""
    return any(c.kind == _KIND_REPLICA and LABEL_ARRAY in c.labels for c in containers)


# ---------------------------------------------------------------------------------------------
# describe
# ---------------------------------------------------------------------------------------------


def _runner_dead(events: Sequence[_Container]) -> str | None:
    """Why the app's runner can start nothing more (it died), or None while it may."""
    runner = next((e for e in events if e.event == _RUNNER_EVENT), None)
    if runner is None:
        return None  # being started by the launcher (which starts the first K itself)
    data = runner.data
    if data.get("host") != socket.gethostname():
        return None  # another host's process: not ours to judge
    if is_alive(data.get("pid"), data.get("start_time")):
        return None
    return f"the array's runner (pid {data.get('pid')}) died before starting them"


def index_facts(containers: Sequence[_Container]) -> tuple[dict[int, IndexFacts], bool, str]:
    """Each index's facts from the app's containers (list entries suffice), whether a
    cancel was recorded, and a note on indices that will never start."""
    replicas = [c for c in containers if c.kind == _KIND_REPLICA]
    events = [c for c in containers if c.kind == _KIND_EVENT]
    cancelled = any(e.event == "cancel" for e in events)
    start_failed = {
        int(e.data.get("index", -1)): str(e.data.get("msg", ""))
        for e in events
        if e.event == _START_FAILED_EVENT
    }
    dead = None if cancelled else _runner_dead(events)
    facts: dict[int, IndexFacts] = {}
    for c in replicas:
        index, code = c.replica_id, c.exit_code
        if c.live:
            facts[index] = IndexFacts(AppState.RUNNING, None, c.name)
        elif c.status in ("exited", "dead") and code is not None:
            if code == 0:
                facts[index] = IndexFacts(AppState.SUCCEEDED, 0, c.name)
            elif cancelled and code in _STOP_EXITS:
                facts[index] = IndexFacts(AppState.CANCELLED, code, c.name)
            else:
                error = json.dumps(
                    {"role": c.role, "replica_id": index, "container": c.name, "exit_code": code,
                     "message": _describe_exit(code), "category": "application"}
                )  # fmt: skip
                facts[index] = IndexFacts(AppState.FAILED, code, c.name, error)
        elif index in start_failed:
            facts[index] = IndexFacts(AppState.FAILED, 127, c.name, start_failed[index])
        elif cancelled:
            facts[index] = IndexFacts(AppState.CANCELLED, None, c.name)
        elif dead is not None:
            facts[index] = IndexFacts(AppState.FAILED, None, c.name, dead)
        else:
            facts[index] = IndexFacts(AppState.PENDING, None, c.name)
    note = dead if dead is not None and any(
        f.structured_error_msg == dead for f in facts.values()
    ) else ""  # fmt: skip
    return facts, cancelled, note


def describe_array(
    app_id: str, containers: Sequence[_Container], first: _Container, docker_host: str
) -> DescribeAppResponse:
    """An array app's description from its containers' list entries (one engine call,
    whatever its size) and its first index container inspected (``first``: its env gives
    the role's secret values back)."""
    replicas = sorted(
        (c for c in containers if c.kind == _KIND_REPLICA), key=lambda c: c.replica_id
    )
    facts, cancelled, note = index_facts(containers)
    found = array_response(read_array_meta(first.labels[LABEL_ARRAY]), first.role, facts)
    state = found.state
    if cancelled and state.is_terminal():
        state = AppState.CANCELLED  # a requested cancel decides, as for any app
    msg = found.msg + (f"; {note}" if note else "")
    role = role_of(first)
    if role is not None:
        role.num_replicas = 1
    return DescribeAppResponse(
        app_id=app_id,
        state=state,
        num_restarts=0,
        msg=msg,
        structured_error_msg=NONE,
        ui_url=None,
        metadata={
            "docker_host": docker_host,
            "network": app_id,
            "containers": ",".join(c.name for c in replicas),
            "session": first.labels.get(LABEL_SESSION, ""),
            "app_name": first.labels.get(LABEL_APP_NAME, ""),
            **{k: v for k, v in first.labels.items() if k in JOB_METADATA_KEYS},
            **({"cancel_requested": "true"} if cancelled else {}),
        },
        roles_statuses=found.roles_statuses,
        roles=[role] if role is not None else [],
        array=found.array,
    )


# ---------------------------------------------------------------------------------------------
# the runner
# ---------------------------------------------------------------------------------------------


def start_runner(docker_host: str, request: DockerAppRequest) -> None:
    """Starts the array's runner, detached (its own session: it outlives this process)."""
    package_root = str(Path(__file__).resolve().parents[3])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", __name__, docker_host, request.app_id],
            cwd=package_root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as e:
        raise DockerSchedulerError(
            f"could not start the runner of array app {request.app_id} ({sys.executable}): "
            f"{e}. Fix: check that the Python interpreter exists and can run"
        ) from e
    threading.Thread(target=proc.wait, name=f"reap-{request.app_id}", daemon=True).start()


def run(client: Any, app_id: str, poll_s: float = 0.1, max_poll_s: float = 1.0) -> int:
    """The runner's loop: starts the next created index container while fewer than the
    limit run, until none is left or a cancel is recorded. Returns how many it started."""
    from anylaunch.schedulers.docker import engine

    docker = engine._docker()

    def view() -> list[_Container]:
        return [_Container.from_summary(s) for s in engine.summaries(client, app_id)]

    containers = view()
    replicas = [c for c in containers if c.kind == _KIND_REPLICA]
    if not replicas:
        return 0
    me = {"pid": os.getpid(), "start_time": process_start_time(os.getpid())}
    engine.record_event(
        client,
        app_id,
        f"{app_id}.{_RUNNER_EVENT}",
        _RUNNER_EVENT,
        {**me, "host": socket.gethostname()},
        replicas[0],
    )
    limit = int(replicas[0].labels.get(LABEL_ARRAY_LIMIT, "1"))
    tried: set[str] = set()
    started = 0
    delay = poll_s
    while True:
        containers = view()
        if any(c.kind == _KIND_EVENT and c.event == "cancel" for c in containers):
            return started
        replicas = sorted(
            (c for c in containers if c.kind == _KIND_REPLICA), key=lambda c: c.replica_id
        )
        waiting = [c for c in replicas if c.status == "created" and c.id not in tried]
        if not waiting:
            return started
        free = limit - sum(1 for c in replicas if c.live)
        for c in waiting[: max(free, 0)]:
            tried.add(c.id)
            try:
                client.api.start(c.id)
                started += 1
            except docker.errors.APIError as e:
                data = {"index": c.replica_id, "msg": engine.engine_error(e)}
                name = f"{app_id}.{_START_FAILED_EVENT}.{c.replica_id}"
                engine.record_event(client, app_id, name, _START_FAILED_EVENT, data, c)
        if free > 0:
            after = view()
            if any(e.kind == _KIND_EVENT and e.event == "cancel" for e in after):
                # a cancel raced with these starts: its stop may have missed them
                grace = float(replicas[0].labels.get(LABEL_CANCEL_GRACE, "5"))
                engine.stop(client, [c for c in after if c.kind == _KIND_REPLICA and c.live], grace)
                return started
            delay = poll_s
        else:
            delay = min(delay * 1.5, max_poll_s)
        time.sleep(delay)


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m anylaunch.schedulers.docker.arrays DOCKER_HOST APP_ID``."""
    from anylaunch.schedulers.docker import engine

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m anylaunch.schedulers.docker.arrays DOCKER_HOST APP_ID")
        return 2
    client = engine.connect(args[0], args[0])
    try:
        run(client, args[1])
    finally:
        with contextlib.suppress(Exception):
            client.close()
    return 0


# ---------------------------------------------------------------------------------------------
# retry
# ---------------------------------------------------------------------------------------------


def retry_app(
    client: Any, app_id: str, containers: Sequence[_Container], indices: Sequence[int]
) -> tuple[AppDef, DockerOpts]:
    """The app (same definition, only ``indices``) and run options that rerun ``indices``
    of array app ``app_id``; ``containers`` are its inspected containers.

    Raises:
        InvalidSpecError: the app is not an array, or an index is out of its range.
    """
    label = f"{LABEL_APP_ID}={app_id}"
    networks = client.api.networks(filters={"label": label})
    text = next((n["Labels"][LABEL_ARRAY_SPEC] for n in networks if LABEL_ARRAY_SPEC in (n.get("Labels") or {})), None)  # fmt: skip
    replicas = sorted(
        (c for c in containers if c.kind == _KIND_REPLICA), key=lambda c: c.replica_id
    )
    role = role_of(replicas[0]) if replicas and text else None
    if text is None or role is None:
        raise InvalidSpecError("app_id", app_id, "is not an array app", "retry arrays only")
    original = arrayspec_from_dict(json.loads(text))
    assert original is not None
    array = retry_spec(original, indices)
    first = replicas[0]
    own = {**role.env, **original.env(first.replica_id)}
    own_names = set(own) | {RANK0_ENV, ARRAY_INDEX_ENV}
    if "PYTHONUNBUFFERED" not in role.env:
        own_names.add("PYTHONUNBUFFERED")
    # what the run options added (copy_env, env) is the rest of the container's own env
    # (the image's env comes along too, with the same values)
    env = {k: v for k, v in first.env.items() if k not in own_names}
    host = _host_config(client, first.id)
    opts = DockerOpts(
        env=env or None,
        privileged=bool(host.get("Privileged")),
        init=bool(host.get("Init")),
        cancel_grace_s=float(first.labels.get(LABEL_CANCEL_GRACE, "5")),
    )
    role.num_replicas = 1
    name = first.labels.get(LABEL_APP_NAME, "array")
    return AppDef(name, [role], array=array), opts


def _host_config(client: Any, container_id: str) -> Mapping[str, Any]:
    attrs = client.api.inspect_container(container_id)
    host: Mapping[str, Any] = attrs.get("HostConfig") or {}
    return host


if __name__ == "__main__":
    sys.exit(main())
