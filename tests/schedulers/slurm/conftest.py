"""Fixtures of the slurm tests: the local cluster (see cluster.py)."""

from tests.schedulers.slurm.cluster import slurm_cluster

__all__ = ["slurm_cluster"]
