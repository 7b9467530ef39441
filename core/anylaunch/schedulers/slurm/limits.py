"""The real cluster's partition limits, checked before ``sbatch``: a component asking for more
CPUs per task than any node of its partition has, or a job asking for more CPUs than the
partition holds, is accepted by ``sbatch`` (with ``EnforcePartLimits=NO``, Slurm's default) and
then stays PENDING (reason ``PartitionConfig``) forever. One ``sinfo`` call per submission;
when ``sinfo`` cannot answer, the check is left to Slurm.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from anylaunch.schedulers.slurm.query import SlurmCommandError, run_slurm
from anylaunch.specs.errors import InvalidSpecError

__all__ = ["PartitionSize", "check_partition_limits", "parse_sinfo", "read_partitions"]

log = logging.getLogger(__name__)

#: ``sinfo`` output: partition (default marked ``*``), CPUs per node, nodes of that size.
SINFO_FORMAT = "%P|%c|%D"


@dataclass(frozen=True)
class PartitionSize:
    """What a partition's nodes hold: the largest node's CPUs and the CPUs of all of them."""

    name: str
    default: bool
    max_node_cpus: int
    total_cpus: int


def parse_sinfo(text: str) -> dict[str, PartitionSize]:
    """Partitions from ``sinfo -h -o '%P|%c|%D'`` (one line per node size of a partition).

    >>> sizes = parse_sinfo("debug*|4|2\\nbig|64|1\\nbig|8|3\\n")
    >>> sizes["debug"], sizes["big"].max_node_cpus, sizes["big"].total_cpus
    (PartitionSize(name='debug', default=True, max_node_cpus=4, total_cpus=8), 64, 88)
    """
    found: dict[str, PartitionSize] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
            continue
        name, default = parts[0].rstrip("*"), parts[0].endswith("*")
        cpus, nodes = int(parts[1]), int(parts[2])
        seen = found.get(name)
        found[name] = PartitionSize(
            name,
            default or (seen.default if seen else False),
            max(cpus, seen.max_node_cpus if seen else 0),
            cpus * nodes + (seen.total_cpus if seen else 0),
        )
    return found


def read_partitions(timeout: float = 30.0) -> dict[str, PartitionSize] | None:
    """The cluster's partitions, or None when ``sinfo`` cannot tell."""
    try:
        return parse_sinfo(run_slurm(["sinfo", "-h", "-o", SINFO_FORMAT], timeout))
    except SlurmCommandError as e:
        log.debug("no partition limits checked: %s", e)
        return None


def check_partition_limits(
    components: Sequence[tuple[str, Mapping[str, str | None]]],
    partitions: Mapping[str, PartitionSize],
) -> None:
    """Refuses a job the partitions it names can never run: ``components`` are each het
    component's role and ``#SBATCH`` options (``partition``, ``ntasks``, ``cpus-per-task``).

    >>> sizes = parse_sinfo("debug*|4|2\\n")
    >>> check_partition_limits([("w", {"ntasks": "2", "cpus-per-task": "4"})], sizes)
    >>> check_partition_limits([("w", {"ntasks": "1", "cpus-per-task": "64"})], sizes)
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: Role[w].resource.cpu=64 is invalid: the largest node of Slurm partition 'debug' has 4 CPUs...
    """
    default = next((p for p in partitions.values() if p.default), None)
    asked: dict[str, int] = {}
    for role, opts in components:
        name = opts.get("partition") or (default.name if default else None)
        size = partitions.get(name) if name else None
        if size is None:  # an unknown partition: sbatch refuses it itself, naming it
            continue
        cpus = _int(opts.get("cpus-per-task"), 1)
        tasks = _int(opts.get("ntasks"), 1)
        if cpus > size.max_node_cpus:
            raise InvalidSpecError(
                f"Role[{role}].resource.cpu",
                cpus,
                f"the largest node of Slurm partition {size.name!r} has {size.max_node_cpus} "
                "CPUs: a replica's CPUs are on one node, so the job would pend forever "
                "(reason PartitionConfig)",
                f"ask for at most {size.max_node_cpus} CPUs per replica, or pick a partition "
                "with larger nodes (partition=..., see `sinfo -o '%P %c %D'`)",
            )
        asked[size.name] = asked.get(size.name, 0) + cpus * tasks
        if asked[size.name] > size.total_cpus:
            raise InvalidSpecError(
                f"Role[{role}].num_replicas",
                tasks,
                f"the job asks for {asked[size.name]} CPUs of Slurm partition {size.name!r}, "
                f"which has {size.total_cpus} in all: it would pend forever (reason "
                "PartitionConfig)",
                "use fewer replicas or CPUs per replica, or a larger partition",
            )


def _int(value: str | None, default: int) -> int:
    return int(value) if value and value.isdigit() else default
