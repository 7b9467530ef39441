"""The LSF jobs of an app (no I/O): one job script per replica, shell-quoted (secrets masked
when printed), with its resources, directories and env."""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from anylaunch.schedulers.common.app_ids import make_app_id
from anylaunch.schedulers.common.job_metadata import job_metadata, owner_metadata
from anylaunch.schedulers.common.roles import CONTROL_CHAR, RANK0_ENV
from anylaunch.schedulers.lsf.names import (
    _PROJECT,
    _QUEUE,
    _SHM,
    BACKEND,
    DEFAULT_JOBDIR,
    LOG_DRAIN_S,
    RANK0_WAIT_S,
    LsfJob,
    LsfOpts,
    LsfRequest,
    job_description,
)
from anylaunch.specs.api import (
    AppDef,
    BindMount,
    DeviceMount,
    Role,
    VolumeMount,
    macros,
)
from anylaunch.specs.errors import (
    InvalidRunConfigException,
    InvalidSpecError,
)
from anylaunch.specs.secrets import is_secret_env_name

log: logging.Logger = logging.getLogger(__name__)


def _is_directory_image(image: str) -> bool:
    return image == "" or image.startswith(("/", ".", "~"))


def _check_path(
    where: str, path: str, fix: str, error: type[InvalidSpecError] = InvalidSpecError
) -> None:
    if CONTROL_CHAR.search(path) or "%" in path:
        raise error(
            where,
            path,
            "contains a control character or '%' (LSF expands %J, %I, ... in job paths)",
            fix,
        )


def _validate_opts(opts: LsfOpts) -> None:
    names = (
        (
            "lsf_queue",
            _QUEUE,
            "is not an LSF queue name (letters, digits, '_' and '-', at most 59)",
            "pass a queue that `bqueues` lists, e.g. normal",
        ),
        (
            "project",
            _PROJECT,
            "is not an LSF project name (no spaces, quotes or control characters, at most 511)",
            "pass e.g. my_project",
        ),
    )
    for field, pattern, problem, fix in names:
        value = getattr(opts, field)
        if value is not None and not pattern.match(value):
            raise InvalidRunConfigException(field, value, problem, fix)
    if not _SHM.match(opts.shm_size):
        raise InvalidRunConfigException(
            "shm_size", opts.shm_size, "is not a docker size", "pass e.g. 64m or 2g"
        )
    if opts.container_workdir is not None and (
        not opts.container_workdir.startswith("/") or CONTROL_CHAR.search(opts.container_workdir)
    ):
        raise InvalidRunConfigException(
            "container_workdir",
            opts.container_workdir,
            "must be an absolute path without control characters",
            "pass e.g. /workspace",
        )
    if opts.jobdir is not None and not opts.jobdir.startswith(("/", "~")):
        # a relative path would be resolved in the launcher's cwd, which no execution host shares
        raise InvalidRunConfigException(
            "jobdir",
            opts.jobdir,
            "is empty" if not opts.jobdir.strip() else "must be an absolute path (or start with ~)",
            "pass a directory shared with the execution hosts, e.g. /shared/$USER/anylaunch",
        )


def _resource_options(role: Role) -> list[str]:
    res = role.resource
    options: list[str] = []
    if res.cpu > 0:
        options += ["-n", str(res.cpu)]
    # all slots on one host; memory per job with an explicit unit (bare numbers mean
    # LSF_UNIT_FOR_LIMITS, KB by default, and per-task reservation would multiply it by -n)
    req = "span[hosts=1]"
    if res.memMB > 0:
        req += f" rusage[mem={res.memMB}MB/job]"
    options += ["-R", req]
    if res.gpu > 0:
        options += ["-gpu", f"num={res.gpu}"]
    return options


def _docker_command(role: Role, name: str, env_names: Sequence[str], opts: LsfOpts) -> list[str]:
    where = f"Role[{role.name}]"
    if role.image.startswith("-") or any(c.isspace() for c in role.image):
        raise InvalidSpecError(
            f"{where}.image", role.image, "is not a container image name", "e.g. python:3.11"
        )
    cmd = ["docker", "run", "--rm", f"--name=anylaunch-{name}"]
    if opts.host_network:
        cmd += ["--net=host", "--ipc=host"]
    else:
        for port in sorted(set(role.port_map.values())):
            cmd += ["-p", f"{port}:{port}"]
    cmd.append(f"--shm-size={opts.shm_size}")
    if opts.container_workdir:
        cmd += ["-w", opts.container_workdir]
    for i, mount in enumerate(role.mounts):
        if isinstance(mount, (BindMount, VolumeMount)):
            src = mount.src_path if isinstance(mount, BindMount) else mount.src
            for value in (src, mount.dst_path):
                if "," in value or '"' in value or CONTROL_CHAR.search(value):
                    raise InvalidSpecError(
                        f"{where}.mounts[{i}]",
                        value,
                        "contains ',', '\"' or a control character, which docker --mount "
                        "cannot take",
                        "rename the path",
                    )
            kind = "bind" if isinstance(mount, BindMount) else "volume"
            spec = f"type={kind},src={src},dst={mount.dst_path}"
            cmd += ["--mount", spec + (",readonly" if mount.read_only else "")]
        elif isinstance(mount, DeviceMount):
            cmd.append(f"--device={mount.src_path}:{mount.dst_path}:{mount.permissions}")
    res = role.resource
    if res.cpu > 0:
        cmd.append(f"--cpus={res.cpu}")
    if res.memMB > 0:
        cmd.append(f"--memory={res.memMB}m")
    if res.gpu > 0:
        # LSF puts the allocated GPUs in CUDA_VISIBLE_DEVICES; all GPUs are mounted in host
        # order, so passing the variable through keeps the job on its own
        cmd += ["--gpus=all", "-e", "CUDA_VISIBLE_DEVICES"]
    for env_name in env_names:
        cmd += ["-e", env_name]  # the value comes from the job's env, never on a command line
    cmd += [f"--entrypoint={role.entrypoint}", role.image, *role.args]
    return cmd


def _job_script(
    *,
    app_id: str,
    job_name: str,
    role: Role,
    replica_id: int,
    app_dir: str,
    log_dir: str,
    workdir: str | None,
    rank0_name: str | None,
    env: Mapping[str, str],
    command: list[str],
    in_container: bool,
    mask: bool,
    array_body: str | None = None,
) -> str:
    """The POSIX sh job script of one replica (every value shell-quoted); with
    ``array_body``, of every element of an array (see :mod:`anylaunch.schedulers.lsf.arrays`):
    the index's logs go to ``{log_dir}/{LSB_JOBINDEX - 1}`` and ``array_body`` runs it."""
    q = shlex.quote
    assignments = [
        q(f"{k}={'***' if mask and is_secret_env_name(k) else v}") for k, v in env.items()
    ]
    lines = [
        "#!/bin/sh",
        f"# anylaunch app {app_id}: role {role.name}, replica {replica_id} (job {job_name})",
        f"a={q(app_dir)}",
        f"d={q(log_dir)}" + ("/$((LSB_JOBINDEX - 1))" if array_body is not None else ""),
        *(['mkdir -p "$d" || exit 1'] if array_body is not None else []),
        "# the replica writes to fds 3 and 4: stdout.log and stderr.log get its output as it is,",
        "# combined.log a line at a time (awk writes whole lines, so no line is ever split).",
        "# This shell keeps its own stdout/stderr (LSF's -o/-e files) for its own messages.",
        'f=$(mktemp -d "${TMPDIR:-/tmp}/anylaunch.XXXXXX") || exit 1',
        'mkfifo "$f/o" "$f/e" "$f/co" "$f/ce" || exit 1',
        'LC_ALL=C awk \'{ print; fflush() }\' <"$f/co" >>"$d/combined.log" &',
        'LC_ALL=C awk \'{ print; fflush() }\' <"$f/ce" >>"$d/combined.log" &',
        'tee -a "$d/stdout.log" >"$f/co" <"$f/o" &',
        "t1=$!",
        'tee -a "$d/stderr.log" >"$f/ce" <"$f/e" &',
        "t2=$!",
        'exec 3>"$f/o" 4>"$f/e"',
        "# every pipe is open at both ends now: the directory can go (nothing left behind)",
        'rm -rf "$f"',
    ]
    if array_body is not None:
        lines.append("h=$(hostname) || exit 1")
    elif rank0_name is None:
        lines += [
            "# rank 0: publish this host for the other replicas",
            "h=$(hostname) || exit 1",
            'printf \'%s\\n\' "$h" >"$a/.rank0_host.$$" && '
            'mv -f "$a/.rank0_host.$$" "$a/rank0_host" || exit 1',
        ]
    else:
        lines += [
            f"# wait for rank 0 (job {rank0_name}) to publish its host",
            "i=0",
            'while [ ! -s "$a/rank0_host" ]; do',
            "  i=$((i + 1))",
            f'  if [ "$i" -gt {RANK0_WAIT_S} ]; then',
            f'    echo "anylaunch: rank 0 (job {rank0_name}) did not write $a/rank0_host '
            f'within {RANK0_WAIT_S}s (is jobdir shared with every execution host?)" >&4',
            "    exit 1",
            "  fi",
            "  sleep 1",
            "done",
            'h=$(cat "$a/rank0_host")',
        ]
    run = " ".join(["env", *assignments, f'"{RANK0_ENV}=$h"', shlex.join(command)])
    to_logs = ">&3 2>&4 3>&- 4>&-"  # the replica does not inherit fds 3 and 4 themselves
    if array_body is not None:
        assert workdir is not None
        lines += [f"cd {q(workdir)} 2>&4 || exit 1", "(", array_body, f") {to_logs}", "rc=$?"]
    elif in_container:
        container = f"anylaunch-{job_name}"
        lines += [
            f"{run} {to_logs} &",
            "p=$!",
            "# a kill (bkill) stops the container too: killing the docker client would not",
            f"trap 'docker kill {q(container)} >/dev/null 2>&1' INT TERM",
            "rc=0",
            'wait "$p" || rc=$?',
            'while kill -0 "$p" 2>/dev/null; do rc=0; wait "$p" || rc=$?; done',
        ]
    else:
        assert workdir is not None
        lines += [
            f"cd {q(workdir)} 2>&4 || exit 1",
            f"{run} {to_logs}",
            "rc=$?",
        ]
    lines += [
        "# close the pipes and wait until the logs are complete; a process the replica left",
        f"# behind may hold them open: stop waiting after {LOG_DRAIN_S}s (LSF ends it anyway)",
        "exec 3>&- 4>&-",
        f'( (sleep {LOG_DRAIN_S}; kill "$t1" "$t2") >/dev/null 2>&1 & )',
        "wait",
        'exit "$rc"',
    ]
    return "\n".join(lines) + "\n"


def _jobdir(opts: LsfOpts) -> str:
    path = os.path.abspath(os.path.expanduser(opts.jobdir or DEFAULT_JOBDIR))
    _check_path(
        "jobdir",
        path,
        "pick a directory without control characters or '%'",
        InvalidRunConfigException,
    )
    return path


def _role_workdir(role: Role, opts: LsfOpts) -> tuple[str | None, str]:
    """The role's working directory (None: it runs in a container) and its img_root."""
    where = f"Role[{role.name}]"
    if not _is_directory_image(role.image):
        return None, opts.container_workdir or ""
    workdir = os.path.abspath(os.path.expanduser(role.image or "."))
    _check_path(f"{where}.image", workdir, "use a directory without '%' in its path")
    if role.mounts:
        raise InvalidSpecError(
            f"{where}.mounts",
            role.mounts,
            "mounts need a container image, and the role's image is a directory",
            "give the role a container image, or drop the mounts (directories on the "
            "shared filesystem are visible as they are)",
        )
    if role.entrypoint.startswith("-") or "=" in role.entrypoint:
        raise InvalidSpecError(
            f"{where}.entrypoint",
            role.entrypoint,
            "starts with '-' or contains '=', which `env` would take as an option or a variable",
            "use the program's path, e.g. ./my=tool as /abs/path/my=tool",
        )
    return workdir, workdir


def _replica_env(replica: Role) -> dict[str, str]:
    """The replica's env (macros applied), checked for what a job script cannot carry."""
    where = f"Role[{replica.name}]"
    env = dict(replica.env)
    env.setdefault("PYTHONUNBUFFERED", "1")  # lines reach the logs as they are printed
    env.pop(RANK0_ENV, None)  # set from rank 0's host at run time
    for key in env:  # (NUL bytes were rejected for every scheduler by submit_dryrun)
        if key.startswith("-"):
            raise InvalidSpecError(
                f"{where}.env",
                key,
                "starts with '-', which `env` and `docker run -e` take as an option",
                "rename the variable",
            )
    return env


def check_host_ports(app: AppDef, opts: LsfOpts) -> None:
    """Refuses a host port two replicas would publish: in containers without
    ``host_network`` every replica's ``port_map`` ports are published on the same host ports
    (``docker run -p P:P``), and LSF may place two of the app's jobs on one host, where the
    second ``docker run`` fails ("port is already allocated") once the job starts.

    >>> from anylaunch.specs import Role
    >>> app = AppDef("a", [Role("w", "img:1", num_replicas=2, port_map={"c10d": 29500})])
    >>> check_host_ports(app, LsfOpts())
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: Role[w].port_map={'c10d': 29500} is invalid: host port 29500 would be published by 2 replicas (w/0, w/1) ...
    >>> check_host_ports(app, LsfOpts(host_network=True))  # nothing is published
    """
    if opts.host_network:
        return
    publishers: dict[int, list[str]] = {}
    for role in app.roles:
        if not role.port_map or _is_directory_image(role.image):
            continue
        array = app.array
        # the replicas that may run at once: an array's elements up to its parallelism
        at_once = (
            min(len(array.selected), array.parallelism or len(array.selected))
            if array is not None
            else role.num_replicas
        )
        for port in sorted(set(role.port_map.values())):
            publishers.setdefault(port, []).extend(f"{role.name}/{k}" for k in range(at_once))
    for port, replicas in publishers.items():
        if len(replicas) > 1:
            role_name = replicas[0].split("/")[0]
            role = next(r for r in app.roles if r.name == role_name)
            shown = ", ".join(replicas[:4]) + (", ..." if len(replicas) > 4 else "")
            raise InvalidSpecError(
                f"Role[{role.name}].port_map",
                role.port_map,
                f"host port {port} would be published by {len(replicas)} replicas ({shown}) "
                "and LSF may run two of them on one host, where docker refuses the second",
                "set host_network=True (containers use the host's network and publish "
                "nothing), or publish the port from one replica only (port_map on a role "
                "with num_replicas=1) and give other roles their own ports",
            )


def _build_request(app: AppDef, opts: LsfOpts, session: str) -> LsfRequest:
    check_host_ports(app, opts)
    if app.array is not None:  # one bsub -J "name[1-N]%K" (one role, one replica)
        from anylaunch.schedulers.lsf.arrays import build_array_request

        common: list[str] = []
        if opts.lsf_queue:
            common += ["-q", opts.lsf_queue]
        if opts.project:
            common += ["-P", opts.project]
        common += _resource_options(app.roles[0])
        return build_array_request(
            app, opts, session, _jobdir(opts), {"common": common}, _job_script
        )
    app_id = make_app_id(app.name)
    app_dir = os.path.join(_jobdir(opts), app_id)
    total = sum(role.num_replicas for role in app.roles)
    rank0_name = f"{app_id}-{app.roles[0].name}-0"
    jobs: list[LsfJob] = []
    # bjobs shows no job env: the owner goes into the description too (for `anylaunch reap`)
    metadata = {**job_metadata(app, BACKEND), **owner_metadata(app)}
    for role in app.roles:
        workdir, img_root = _role_workdir(role, opts)
        if role.max_retries > 0:
            log.warning(
                "the lsf scheduler does not restart replicas: Role[%s].max_retries=%d is ignored",
                role.name,
                role.max_retries,
            )
        for k in range(role.num_replicas):
            name = f"{app_id}-{role.name}-{k}"
            values = macros.Values(
                img_root=img_root, app_id=app_id, replica_id=str(k), rank0_env=RANK0_ENV
            )
            replica = values.apply(role)
            env = _replica_env(replica)
            if workdir is None:
                command = _docker_command(replica, name, [*env, RANK0_ENV], opts)
            else:
                command = [replica.entrypoint, *replica.args]
            log_dir = os.path.join(app_dir, role.name, str(k))
            is_rank0 = not jobs
            options = [
                "-J",
                name,
                "-Jd",
                job_description(app_id, role.name, k, total, session, app.name, metadata),
            ]
            if opts.lsf_queue:
                options += ["-q", opts.lsf_queue]
            if opts.project:
                options += ["-P", opts.project]
            options += _resource_options(role)
            options += [
                "-o",
                os.path.join(log_dir, "lsf.out"),
                "-e",
                os.path.join(log_dir, "lsf.err"),
            ]
            options += ["-cwd", workdir or app_dir]
            if not is_rank0:
                options += ["-w", f'started("{rank0_name}")']
            script_args: dict[str, Any] = {
                "app_id": app_id,
                "job_name": name,
                "role": role,
                "replica_id": k,
                "app_dir": app_dir,
                "log_dir": log_dir,
                "workdir": workdir,
                "rank0_name": None if is_rank0 else rank0_name,
                "env": env,
                "command": command,
                "in_container": workdir is None,
            }
            jobs.append(
                LsfJob(
                    role=role.name,
                    replica_id=k,
                    name=name,
                    options=options,
                    log_dir=log_dir,
                    script=_job_script(**script_args, mask=False),
                    display_script=_job_script(**script_args, mask=True),
                )
            )
    return LsfRequest(app_id=app_id, app_name=app.name, session=session, app_dir=app_dir, jobs=jobs)
