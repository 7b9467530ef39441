"""Distributed training components: ``dist.ddp`` and ``dist.spmd``.

A DDP-style job is one role of ``nnodes`` identical replicas; each replica runs ``torchrun``,
which starts ``nproc_per_node`` worker processes and joins a rendezvous with the other nodes.

.. code:: shell-session

    # one node, four workers
    $ anylaunch run -s local_cwd dist.ddp -j 1x4 --script main.py
    # two nodes, four workers each (8 in all)
    $ anylaunch run -s kubernetes dist.ddp -j 2x4 --script main.py
    # elastic: between 2 and 5 nodes of 8 workers
    $ anylaunch run -s kubernetes dist.ddp -j 2:5x8 --script main.py

Only the scheduler (``-s``) changes between a local and a remote launch.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import anylaunch.specs as specs
from anylaunch.components import DEFAULT_IMAGE
from anylaunch.components.structured_arg import StructuredJArgument, StructuredNameArgument
from anylaunch.specs import macros
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.resources import resource

__all__ = ["TORCH_DEBUG_FLAGS", "JSpec", "ddp", "parse_j", "spmd"]

#: Environment variables set by ``debug=True`` to debug PyTorch (CUDA and NCCL) execution.
TORCH_DEBUG_FLAGS: dict[str, str] = {
    "CUDA_LAUNCH_BLOCKING": "1",
    "NCCL_DESYNC_DEBUG": "1",
    "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
    "TORCH_SHOW_CPP_STACKTRACES": "1",
}

_J_FIX = (
    "use {nnodes}x{nproc_per_node} (e.g. 2x4), {min_nnodes}:{max_nnodes}x{nproc_per_node} "
    "for an elastic job (e.g. 1:4x8), or {nproc_per_node} for one node (e.g. 4)"
)
_J_ELASTIC = re.compile(r"^(\d+):(\d+)x(\d+)$")
_J_FIXED = re.compile(r"^(\d+)x(\d+)$")
_J_NPROC = re.compile(r"^(\d+)$")


@dataclass(frozen=True)
class JSpec:
    """A parsed ``-j`` topology: node counts and processes per node."""

    min_nnodes: int
    max_nnodes: int
    nproc_per_node: int

    @property
    def nnodes(self) -> str:
        """The ``torchrun --nnodes`` value: ``N``, or ``MIN:MAX`` when elastic."""
        if self.min_nnodes == self.max_nnodes:
            return str(self.max_nnodes)
        return f"{self.min_nnodes}:{self.max_nnodes}"

    @property
    def is_elastic(self) -> bool:
        """True when the number of nodes may vary between min and max."""
        return self.min_nnodes != self.max_nnodes


def parse_j(j: str) -> JSpec:
    """Parses ``-j`` as ``[{min_nnodes}:]{nnodes}x{nproc_per_node}`` or ``{nproc_per_node}``.

    >>> parse_j("2x4")
    JSpec(min_nnodes=2, max_nnodes=2, nproc_per_node=4)
    >>> parse_j("1:3x8").nnodes
    '1:3'
    >>> parse_j("4")  # a bare number is the process count on one node
    JSpec(min_nnodes=1, max_nnodes=1, nproc_per_node=4)
    >>> parse_j("2y4")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: j='2y4' is invalid: is not a job topology. Fix: ...

    Args:
        j: the job topology

    Returns:
        the parsed topology
    """
    text = j.strip() if isinstance(j, str) else ""
    if match := _J_ELASTIC.fullmatch(text):
        lo, hi, nproc = (int(g) for g in match.groups())
    elif match := _J_FIXED.fullmatch(text):
        lo, nproc = (int(g) for g in match.groups())
        hi = lo
    elif match := _J_NPROC.fullmatch(text):
        lo = hi = 1
        nproc = int(match.group(1))
    else:
        raise InvalidSpecError("j", j, "is not a job topology", _J_FIX)
    if min(lo, hi, nproc) < 1:
        raise InvalidSpecError("j", j, "node and process counts must be at least 1", _J_FIX)
    if lo > hi:
        raise InvalidSpecError(
            "j",
            j,
            f"min_nnodes={lo} is greater than max_nnodes={hi}",
            "write MIN:MAX with MIN <= MAX",
        )
    return JSpec(lo, hi, nproc)


class _Raw(str):
    """A shell word that must reach the shell unquoted (it holds an expansion)."""

    __slots__ = ()


def _shell_join(words: list[str]) -> str:
    return " ".join(w if isinstance(w, _Raw) else shlex.quote(w) for w in words)


def _role_name(script: str | None, m: str | None) -> str:
    """The script's file name without extension, or the module's last part."""
    return Path(script).stem if script else str(m).rpartition(".")[2]


def _check_port(port: object) -> None:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise InvalidSpecError("rdzv_port", port, "is not a TCP port", "use a port in 1-65535")


def ddp(
    *script_args: str,
    script: str | None = None,
    m: str | None = None,
    image: str = DEFAULT_IMAGE,
    name: str = "/",
    h: str | None = None,
    cpu: int = 2,
    gpu: int = 0,
    memMB: int = 1024,
    j: str = "1x2",
    env: dict[str, str] | None = None,
    metadata: dict[str, str] | None = None,
    max_retries: int = 0,
    rdzv_port: int = 29500,
    rdzv_backend: str = "c10d",
    rdzv_conf: str | None = None,
    mounts: list[str] | None = None,
    debug: bool = False,
    tee: int = 3,
) -> specs.AppDef:
    """Distributed data parallel style application (one role, multi-replica).

    Each replica runs ``torchrun`` (``torch.distributed.run``), which starts
    ``nproc_per_node`` workers. A multi-node job rendezvouses (``c10d`` by default) on
    ``$RANK0_HOST:rdzv_port``, where the scheduler names the rank-0 host variable through
    :data:`~anylaunch.specs.macros.rank0_env`; so the command runs under ``sh -c`` (the host is
    ``localhost`` when the variable is unset, as on rank 0 of some schedulers). A single-node
    job rendezvouses on ``localhost:0`` (torchrun picks a free port; ``rdzv_port`` is unused).

    ``h`` (a named resource) takes precedence over ``cpu``, ``gpu`` and ``memMB``. The default
    image ``"."`` is the current directory, which is what the local schedulers run in; pass a
    container image for container schedulers.

    >>> app = ddp("--lr", "0.1", script="train.py", j="2x4")
    >>> role = app.roles[0]
    >>> (app.name, role.name, role.num_replicas, role.entrypoint)
    ('train', 'train', 2, 'sh')
    >>> print(role.args[1])
    exec torchrun --rdzv_backend c10d --rdzv_endpoint $${${rank0_env}:=localhost}:29500 --rdzv_id '${app_id}' --nnodes 2 --nproc_per_node 4 --tee 3 --role '' train.py --lr 0.1

    Args:
        script_args: arguments to the main script or module
        script: script or binary to run within the image
        m: the python module path to run
        image: image (e.g. docker) or, for the local schedulers, a directory
        name: job name: ``{experimentname}/{runname}``, ``{experimentname}/``, ``/{runname}``
            or ``{runname}``; the run name defaults to the script or module name
        h: a registered named resource (if specified takes precedence over cpu, gpu, memMB)
        cpu: number of cpus per replica
        gpu: number of gpus per replica
        memMB: cpu memory in MB per replica
        j: [{min_nnodes}:]{nnodes}x{nproc_per_node}, for gpu hosts, nproc_per_node must not
            exceed num gpus
        env: environment variables to be passed to the run (e.g. ENV1=v1,ENV2=v2,ENV3=v3)
        metadata: metadata to be passed to the scheduler (e.g. KEY1=v1,KEY2=v2,KEY3=v3)
        max_retries: the number of scheduler retries allowed
        rdzv_port: the port on rank0's host to use for hosting the c10d store used for
            rendezvous; only takes effect when running multi-node
        rdzv_backend: the rendezvous backend to use (c10d, static, etcd, ...)
        rdzv_conf: additional rendezvous configuration (e.g. join_timeout=600,timeout=600)
        mounts: mounts to mount into the worker environment/container
            (ex. type=<bind/volume>,src=/host,dst=/job[,readonly]); see the scheduler's docs
        debug: whether to run with preset debug flags enabled
        tee: tees the given std stream(s) to console + file: 0 none, 1 stdout, 2 stderr, 3 both

    Returns:
        the application definition
    """
    names = StructuredNameArgument.parse_from(name, m=m, script=script)
    topology = parse_j(j)
    _check_port(rdzv_port)

    if topology.max_nnodes == 1:
        # all workers run under one torchrun agent: any free port will do
        endpoint = "localhost:0"
    else:
        # The scheduler sets the variable named by rank0_env to rank 0's address; some (e.g.
        # AWS Batch) set it everywhere but on rank 0, hence the localhost default. "$$" keeps
        # a literal "$" through macro substitution so that the shell expands the variable.
        endpoint = _Raw(f"$${{{macros.rank0_env}:=localhost}}:{rdzv_port}")

    role_env = dict(env or {})
    role_env["ANYLAUNCH_TRACKING_EXPERIMENT_NAME"] = names.experiment_name
    role_env["ANYLAUNCH_TRACKING_RUN_NAME"] = names.run_name
    role_env.setdefault("LOGLEVEL", os.getenv("LOGLEVEL", "WARNING"))
    if debug:
        role_env.update(TORCH_DEBUG_FLAGS)

    cmd = ["torchrun", "--rdzv_backend", rdzv_backend]
    if rdzv_conf is not None:
        cmd += ["--rdzv_conf", rdzv_conf]
    cmd += [
        "--rdzv_endpoint",
        endpoint,
        "--rdzv_id",
        macros.app_id,
        "--nnodes",
        topology.nnodes,
        "--nproc_per_node",
        str(topology.nproc_per_node),
        "--tee",
        str(tee),
        "--role",
        "",
    ]
    if rdzv_backend == "static":
        # only the static backend needs to be told each node's rank
        cmd += ["--node_rank", macros.replica_id]
    cmd += [script] if script is not None else ["-m", str(m)]
    cmd += script_args

    return specs.AppDef(
        name=names.run_name,
        roles=[
            specs.Role(
                name=_role_name(script, m),
                image=image,
                min_replicas=topology.min_nnodes if topology.is_elastic else None,
                # exec: torchrun replaces the shell, so it receives the scheduler's signals
                entrypoint="sh",
                args=["-c", f"exec {_shell_join(cmd)}"],
                num_replicas=topology.max_nnodes,
                resource=resource(cpu=cpu, gpu=gpu, memMB=memMB, h=h),
                env=role_env,
                port_map={"c10d": rdzv_port},
                max_retries=max_retries,
                mounts=specs.parse_mounts(mounts) if mounts else [],
            )
        ],
        metadata=dict(metadata or {}),
    )


def spmd(
    *args: str,
    script: str | None = None,
    m: str | None = None,
    image: str = DEFAULT_IMAGE,
    name: str = "/",
    h: str = "gpu.small",
    j: str = "1x1",
    env: dict[str, str] | None = None,
    metadata: dict[str, str] | None = None,
    max_retries: int = 0,
    mounts: list[str] | None = None,
    debug: bool = False,
) -> specs.AppDef:
    """Single-Program-Multiple-Data (SPMD) style application: ``n x m`` copies of one program.

    ``-j NxM`` runs ``M`` processes on each of ``N`` hosts of type ``h`` (a named resource).
    ``-j N`` runs one process per GPU of the host. Use it for any distributed PyTorch script
    (DDP, FSDP, RPC); ``-j 1x1`` runs a single process that may still call
    ``torch.distributed.init_process_group``. Multi-node runs need the hosts to reach each
    other on port 29500. Built on :func:`ddp`.

    >>> app = spmd(script="trainer.py", j="2", h="gpu.medium", name="exp/trial_1")
    >>> (app.name, app.roles[0].num_replicas, "--nproc_per_node 2" in app.roles[0].args[1])
    ('trial_1', 2, True)

    Args:
        args: the arguments to the main module or script (e.g. my/trainer.py -foo bar);
            for image based runs the script path is relative to the image's working dir
        script: the main script (e.g. my/trainer.py)
        m: the main module name (e.g. my.module.trainer), run as ``python -m``
        image: the base image of the job (for the local schedulers, a directory)
        name: ``{experimentname}/{runname}``, ``{experimentname}/``, ``/{runname}`` or
            ``{runname}``
        h: the type of host to run on (e.g. aws_p4d.24xlarge); a registered named resource
        j: [{min_nnodes}:]{nnodes}x{nproc_per_node}; for GPU hosts omitting nproc_per_node
            infers it from the GPU count of the host
        env: environment variables to be passed to the run (e.g. ENV1=v1,ENV2=v2,ENV3=v3)
        metadata: metadata to be passed to the scheduler (e.g. KEY1=v1,KEY2=v2,KEY3=v3)
        max_retries: the number of scheduler retries allowed
        mounts: mounts to mount into the worker environment/container
            (ex. type=<bind/volume>,src=/host,dst=/job[,readonly])
        debug: whether to run with preset debug flags enabled

    Returns:
        the application definition
    """
    StructuredNameArgument.parse_from(name, m=m, script=script)  # checks script/m and name
    return ddp(
        *args,
        script=script,
        m=m,
        image=image,
        name=name,
        h=h,
        j=str(StructuredJArgument.parse_from(h, j)),
        env=env,
        metadata=metadata,
        max_retries=max_retries,
        mounts=mounts,
        debug=debug,
    )
