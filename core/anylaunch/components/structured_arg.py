"""Structured component arguments: one short argument that stands for several, parsed the same
way by every component (TorchX's ``torchx.components.structured_arg``).

- ``--name {experiment}/{run}`` (:class:`StructuredNameArgument`): the experiment and run names
  a tracker files the run under, as :func:`~anylaunch.components.dist.ddp` reads its ``name``;
- ``-j [{min_nnodes}:]{nnodes}x{nproc_per_node}`` (:class:`StructuredJArgument`): the job's
  topology on hosts of a named resource, as :func:`~anylaunch.components.dist.spmd` reads its
  ``j``: ``-j 2`` on a GPU host runs one process per GPU.

Both raise :class:`~anylaunch.specs.errors.InvalidSpecError` (a ``ValueError``) for a value
that cannot work.

>>> str(StructuredNameArgument.parse_from("t5/bf16_trial", m="t5.train"))
't5/bf16_trial'
>>> str(StructuredJArgument.parse_from(h="gpu.medium", j="2"))
'2x2'
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path

from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.resources import named_resources

__all__ = ["DEFAULT_EXPERIMENT_NAME", "StructuredJArgument", "StructuredNameArgument"]

#: The experiment name of a ``name`` that gives none (``/run``, ``run`` or ``/``).
DEFAULT_EXPERIMENT_NAME = "default-experiment"

_NODES = re.compile(r"^(?:(\d+):)?(\d+)$")


def _check_program(script: str | None, m: str | None) -> None:
    if (script is None) == (m is None):
        raise InvalidSpecError(
            "script/m",
            {"script": script, "m": m},
            "exactly one of script and m must be set",
            "pass --script path/to/train.py or -m my.package.train (not both)",
        )
    for field_name, value in (("script", script), ("m", m)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InvalidSpecError(
                field_name, value, "must be a non-empty str", "pass a script path or module name"
            )


@dataclass
class StructuredNameArgument:
    """The experiment and run names of ``--name {experiment}/{run}``.

    Args:
        experiment_name: the experiment (a tracker's group of runs)
        run_name: the run, within the experiment
    """

    experiment_name: str
    run_name: str

    def __str__(self) -> str:
        return f"{self.experiment_name}/{self.run_name}"

    @staticmethod
    def parse_from(
        name: str,
        m: str | None = None,
        script: str | None = None,
        default_experiment_name: str = DEFAULT_EXPERIMENT_NAME,
    ) -> StructuredNameArgument:
        """Parses ``name`` of a component that runs the main module ``m`` or ``script``.

        ``foo/bar`` names both; ``foo/`` only the experiment; ``/bar`` and ``bar`` only the run;
        ``/`` neither. A missing run name is the script's file name without extension, or the
        module's last part; a missing experiment name is ``default_experiment_name``.

        >>> StructuredNameArgument.parse_from("foo/bar", script="bar/baz.py")
        StructuredNameArgument(experiment_name='foo', run_name='bar')
        >>> StructuredNameArgument.parse_from("foo/", m="foo.bar.baz")
        StructuredNameArgument(experiment_name='foo', run_name='baz')
        >>> StructuredNameArgument.parse_from("/", script="train.py").experiment_name
        'default-experiment'
        >>> StructuredNameArgument.parse_from("foo/bar")
        Traceback (most recent call last):
        ...
        anylaunch.specs.errors.InvalidSpecError: script/m={'script': None, 'm': None} is invalid: exactly one of script and m must be set. Fix: ...

        Args:
            name: ``{experiment}/{run}``, ``{experiment}/``, ``/{run}`` or ``{run}``
            m: the main module (e.g. ``foo.bar.baz``)
            script: the main script (e.g. ``foo/bar/baz.py``)
            default_experiment_name: the experiment name when ``name`` gives none

        Returns:
            the experiment and run names

        Raises:
            InvalidSpecError: not exactly one of ``m`` and ``script`` is set, or ``name`` is
                not a str.
        """
        _check_program(script, m)
        if not isinstance(name, str):
            raise InvalidSpecError(
                "name",
                name,
                "must be a str",
                "pass {experiment}/{run}, {experiment}/, /{run} or {run}",
            )
        experiment, sep, run = name.partition("/")
        if not sep:  # no delimiter: the whole name is the run name
            experiment, run = "", name
        if not run.strip():
            run = Path(script).stem if script else str(m).rpartition(".")[2]
        return StructuredNameArgument(experiment.strip() or default_experiment_name, run.strip())


@dataclass(repr=False)
class StructuredJArgument:
    """The topology of ``-j [{min_nnodes}:]{nnodes}x{nproc_per_node}`` on a host type.

    Args:
        nnodes: the number of nodes (the most, for an elastic job)
        nproc_per_node: the number of processes on each node
        min_nnodes: the fewest nodes of an elastic job (``None``: exactly ``nnodes``)
    """

    nnodes: int
    nproc_per_node: int
    min_nnodes: int | None = None

    def __str__(self) -> str:
        nodes = str(self.nnodes)
        if self.min_nnodes is not None and self.min_nnodes != self.nnodes:
            nodes = f"{self.min_nnodes}:{nodes}"
        return f"{nodes}x{self.nproc_per_node}"

    def __repr__(self) -> str:
        fields = f"nnodes={self.nnodes}, nproc_per_node={self.nproc_per_node}"
        if self.min_nnodes is not None:
            fields += f", min_nnodes={self.min_nnodes}"
        return f"StructuredJArgument({fields})"

    @staticmethod
    def parse_from(h: str, j: str) -> StructuredJArgument:
        """Parses ``j`` for hosts of the named resource ``h``.

        ``-j 2`` (nodes only) on a GPU host runs one process per GPU of the host; a host
        without GPUs needs the process count (``-j 2x8``). An explicit count that differs from
        the GPU count of a GPU host is kept, with a warning.

        >>> StructuredJArgument.parse_from(h="aws_p4d.24xlarge", j="2")
        StructuredJArgument(nnodes=2, nproc_per_node=8)
        >>> str(StructuredJArgument.parse_from(h="aws_p4d.24xlarge", j="1:4"))
        '1:4x8'
        >>> str(StructuredJArgument.parse_from(h="aws_trn1.32xlarge", j="2x16"))
        '2x16'
        >>> StructuredJArgument.parse_from(h="aws_trn1.32xlarge", j="2")
        Traceback (most recent call last):
        ...
        anylaunch.specs.errors.InvalidSpecError: j='2' is invalid: nproc_per_node cannot be inferred: host type 'aws_trn1.32xlarge' has no GPUs. Fix: give the process count explicitly, e.g. -j 2x8

        Args:
            h: the host type, a registered named resource (e.g. ``aws_p4d.24xlarge``)
            j: ``[{min_nnodes}:]{nnodes}x{nproc_per_node}``, or ``[{min_nnodes}:]{nnodes}``
                on a GPU host

        Returns:
            the topology

        Raises:
            InvalidSpecError: ``j`` is not a topology, or gives no process count for a host
                without GPUs.
        """
        text = j.strip() if isinstance(j, str) else ""
        nodes, sep, nproc = text.partition("x")
        match = _NODES.fullmatch(nodes)
        if match is None or (sep and not nproc.isdigit()):
            raise InvalidSpecError(
                "j",
                j,
                "is not a job topology",
                "use [{min_nnodes}:]{nnodes}x{nproc_per_node} (e.g. 2x8), or {nnodes} (e.g. 2) "
                "to run one process per GPU of the host",
            )
        low, high = match.groups()
        gpus = named_resources[h].gpu
        if not sep:
            if gpus < 1:
                raise InvalidSpecError(
                    "j",
                    j,
                    f"nproc_per_node cannot be inferred: host type {h!r} has no GPUs",
                    f"give the process count explicitly, e.g. -j {nodes}x8",
                )
            nproc = str(gpus)
        elif gpus and int(nproc) != gpus:
            warnings.warn(
                f"-j {j} runs {nproc} processes per node but a {h} has {gpus} GPU(s); this may "
                f"under-use the host or fail. Pass -j {nodes} to run one process per GPU.",
                stacklevel=2,
            )
        return StructuredJArgument(
            int(high), int(nproc), min_nnodes=None if low is None else int(low)
        )
