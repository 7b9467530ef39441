"""The layout of ``anylaunch.schedulers``: TorchX's module paths are thin entry modules over one
package per backend."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from anylaunch.schedulers import DEFAULT_SCHEDULER_MODULES, get_scheduler_factory
from anylaunch.schedulers.api import Scheduler
from anylaunch.specs import AppDef, Resource, Role
from anylaunch.specs.structured_opts import StructuredOpts

SCHEDULERS = Path(__file__).resolve().parents[2] / "core" / "anylaunch" / "schedulers"

#: scheduler name -> its TorchX module path (in anylaunch.schedulers), and there its scheduler
#: class, run options and dry-run request
PUBLIC = {
    "local_cwd": ("local_scheduler", "LocalScheduler", "LocalOpts", "LocalAppRequest"),
    "local_docker": ("docker_scheduler", "DockerScheduler", "DockerOpts", "DockerAppRequest"),
    "slurm": ("slurm_scheduler", "SlurmScheduler", "SlurmOpts", "SlurmBatchRequest"),
    "kubernetes": (
        "kubernetes_scheduler",
        "KubernetesScheduler",
        "KubernetesOpts",
        "KubernetesRequest",
    ),
    "kubernetes_mcad": (
        "kubernetes_mcad_scheduler",
        "KubernetesMCADScheduler",
        "KubernetesMCADOpts",
        "KubernetesRequest",
    ),
    "aws_batch": ("aws_batch_scheduler", "AWSBatchScheduler", "AWSBatchOpts", "BatchJobRequest"),
    "aws_sagemaker": (
        "aws_sagemaker_scheduler",
        "AWSSageMakerScheduler",
        "AWSSageMakerOpts",
        "SageMakerJobRequest",
    ),
    "lsf": ("lsf_scheduler", "LsfScheduler", "LsfOpts", "LsfRequest"),
}

#: run options a dry run needs (aws_batch, aws_sagemaker)
NEEDED = {
    "aws_batch": {"queue": "q"},
    "aws_sagemaker": {
        "role_arn": "arn:aws:iam::123456789012:role/trainer",
        "output_path": "s3://bucket/out",
        "instance_type": "ml.m5.xlarge",
    },
}


def test_the_registry_loads_every_builtin_scheduler_from_its_torchx_module_path() -> None:
    paths = {name: f"anylaunch.schedulers.{path}" for name, (path, *_) in PUBLIC.items()}
    assert paths == DEFAULT_SCHEDULER_MODULES


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_an_entry_module_exposes_torchx_names_and_nothing_else(name: str) -> None:
    module = importlib.import_module(DEFAULT_SCHEDULER_MODULES[name])
    _, scheduler_class, opts, request = PUBLIC[name]
    assert sorted(module.__all__) == sorted([scheduler_class, opts, request, "create_scheduler"])
    public = {n for n in vars(module) if not n.startswith("_")}
    assert public == set(module.__all__), "an entry module imports what it exposes, only"
    assert issubclass(getattr(module, scheduler_class), Scheduler)
    assert issubclass(getattr(module, opts), StructuredOpts)
    # the registry's factory is the entry module's, and it makes that scheduler
    scheduler = get_scheduler_factory(name)("layout")
    assert type(scheduler) is getattr(module, scheduler_class)
    assert module.create_scheduler("layout").backend == name


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_a_dry_run_returns_the_request_type_the_entry_module_names(name: str) -> None:
    module = importlib.import_module(DEFAULT_SCHEDULER_MODULES[name])
    role = Role("w", "busybox:latest", entrypoint="echo", resource=Resource(1, 0, 64))
    scheduler = module.create_scheduler("layout")
    info = scheduler.submit_dryrun(AppDef("a", [role]), NEEDED.get(name, {}))
    assert isinstance(info.request, getattr(module, PUBLIC[name][3]))


def test_at_most_fifteen_modules_sit_directly_in_schedulers() -> None:
    assert len(list(SCHEDULERS.glob("*.py"))) <= 15
