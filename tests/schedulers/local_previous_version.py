"""An app directory as the previous version of local_cwd left it (before the scheduler base
layer, commit 7b65622): what an upgrade finds of the apps launched before it.

The records are those that version wrote (its ``request.json`` keeps each role in its own
form: ``retry_policy`` as the policy's value, ``resource`` with cpu/gpu/memMB only, no
metadata/mounts/workspace/overrides), and each log has the ``(offset, time)`` index its
supervisor wrote beside it.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from anylaunch.schedulers.local import state as ls

APP_ID = "old-app-wuoklvrf"
ROLE = "trainer"
#: The role's record in the previous version's form.
OLD_ROLE_RECORD: dict[str, Any] = {
    "args": ["-c", "echo out $0; echo err >&2", "x"],
    "entrypoint": "sh",
    "env": {"API_TOKEN": "s3cr3t", "LR": "0.1"},
    "image": ".",
    "max_retries": 1,
    "min_replicas": None,
    "name": ROLE,
    "num_replicas": 2,
    "port_map": {"http": 8080},
    "resource": {"cpu": 1, "gpu": 0, "memMB": 64},
    "retry_policy": "APPLICATION",
}


def dead_supervisor() -> dict[str, Any]:
    """The identity of a supervisor that is gone (a finished process, another start time)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return {"pid": proc.pid, "start_time": "0"}


def _replica(app_dir: Path, i: int) -> dict[str, Any]:
    logs = app_dir / "logs" / ROLE / str(i)
    return {
        "cmd": ["sh", "-c", "echo out $0; echo err >&2", "x"],
        "combined_log": str(logs / "combined.log"),
        "cwd": "/tmp",
        "env": {
            "ANYLAUNCH_RANK0_HOST": "localhost",
            "API_TOKEN": "s3cr3t",
            "LR": "0.1",
            "PYTHONUNBUFFERED": "1",
        },
        "replica_id": i,
        "role": ROLE,
        "stderr_log": str(logs / "stderr.log"),
        "stdout_log": str(logs / "stdout.log"),
    }


def write_log(path: str, chunks: Sequence[tuple[float, str]]) -> None:
    """Writes ``(time, text)`` chunks to a log and its index, as the old supervisor did."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = b""
    index = b""
    for ts, text in chunks:
        index += ls.INDEX_RECORD.pack(len(data), ts)
        data += text.encode()
    Path(path).write_bytes(data)
    if index:
        Path(ls.index_path(path)).write_bytes(index)


def write_app(
    root: Path,
    *,
    state: str,
    replicas: Sequence[Mapping[str, Any]],
    supervisor: Mapping[str, Any],
    created: float,
    logs: Mapping[tuple[int, str], Sequence[tuple[float, str]]] = {},
) -> Path:
    """Writes the directory of app :data:`APP_ID` under ``root``: its request, its state
    (``state`` with ``replicas``, each a dict of its recorded fields), its supervisor's
    identity and the logs given as ``{(replica, stream): [(time, text), ...]}``."""
    app_dir = root / APP_ID
    app_dir.mkdir(parents=True, mode=0o700)
    requests = [_replica(app_dir, i) for i in range(len(replicas))]
    request = {
        "app_dir": str(app_dir),
        "app_id": APP_ID,
        "app_name": "old app",
        "cancel_grace_s": 0.5,
        "created": created,
        "log_dir": str(app_dir / "logs"),
        "prepend_cwd": False,
        "roles": [
            {
                "max_retries": 1,
                "name": ROLE,
                "replicas": requests,
                "retry_policy": "APPLICATION",
                "spec": OLD_ROLE_RECORD,
            }
        ],
        "session": "old",
        "supervisor": dict(supervisor),
    }
    (app_dir / ls.REQUEST_FILE).write_text(json.dumps(request, sort_keys=True))
    recorded = {
        "created": created,
        "log_dir": str(app_dir / "logs"),
        "msg": "",
        "num_restarts": 0,
        "replicas": [
            {
                "exit_code": 0 if r["state"] == "SUCCEEDED" else None,
                "id": i,
                "pid": None,
                "restarts": 0,
                "role": ROLE,
                "start_time": None,
                "structured_error_msg": "<NONE>",
                **r,
            }
            for i, r in enumerate(replicas)
        ],
        "state": state,
        "structured_error_msg": "<NONE>",
        "supervisor": dict(supervisor),
        "updated": created,
    }
    (app_dir / ls.STATE_FILE).write_text(json.dumps(recorded, sort_keys=True))
    ended = state in ("SUCCEEDED", "FAILED", "CANCELLED")
    (app_dir / ls.SUPERVISOR_LOG).write_text(f"app ended {state}\n" if ended else "")
    for rep in requests:
        for stream in ("stdout", "stderr", "combined"):
            write_log(rep[f"{stream}_log"], logs.get((rep["replica_id"], stream), []))
    return app_dir
