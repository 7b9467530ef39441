"""The layout of ``anylaunch.schedulers``: TorchX's module paths are thin entry modules over one
package per backend."""

from __future__ import annotations

import ast
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


#: TorchX's own public helpers an entry module also exposes (under TorchX's names).
TORCHX_HELPERS = {"local_docker": ["has_docker"]}


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_an_entry_module_exposes_torchx_names_and_nothing_else(name: str) -> None:
    module = importlib.import_module(DEFAULT_SCHEDULER_MODULES[name])
    _, scheduler_class, opts, request = PUBLIC[name]
    helpers = TORCHX_HELPERS.get(name, [])
    expected = [scheduler_class, opts, request, "create_scheduler", *helpers]
    assert sorted(module.__all__) == sorted(expected)
    public = {n for n in vars(module) if n.isidentifier() and not n.startswith("_")}
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


BACKENDS = ("local", "docker", "kubernetes", "aws", "slurm", "lsf")
#: What a part of anylaunch.schedulers may import from anylaunch.schedulers: its own package, and
#: what stands below it (common below api, api below every backend).
MAY_IMPORT = {
    "common": {"common"},
    "api": {"api", "common"},
    **{backend: {backend, "api", "common"} for backend in BACKENDS},
}


def _part(module: str) -> str:
    """The part of anylaunch.schedulers a module belongs to: a package, "api", or "" for the
    registry and TorchX's entry modules (which stand above everything)."""
    parts = module.split(".")
    if parts[:2] != ["anylaunch", "schedulers"] or len(parts) < 3:
        return ""
    return parts[2] if parts[2] in MAY_IMPORT else ""


def _imports() -> list[tuple[str, str, int, str, list[str]]]:
    """(path, importing module, line, imported module, names) of every import under
    anylaunch/schedulers, lazy ones included."""
    found = []
    for path in sorted(SCHEDULERS.rglob("*.py")):
        rel = path.relative_to(SCHEDULERS.parent.parent).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [a.name for a in node.names]
                target = node.module
                if target in ("anylaunch.schedulers", "anylaunch.schedulers.common"):
                    # `from anylaunch.schedulers.common import app_ids`: the submodules
                    target, names = f"{target}.{names[0]}", names[1:]
                found.append((str(path), module, node.lineno, target, names))
            elif isinstance(node, ast.Import):
                found += [(str(path), module, node.lineno, a.name, []) for a in node.names]
    return found


def test_each_package_imports_only_itself_and_what_stands_below_it() -> None:
    wrong = [
        f"{path}:{line}: {module} imports {target}"
        for path, module, line, target, _ in _imports()
        if _part(module)
        and target.startswith("anylaunch.schedulers")
        and _part(target) not in MAY_IMPORT[_part(module)]
    ]
    assert wrong == []


def test_no_private_name_is_imported_from_another_package() -> None:
    wrong = [
        f"{path}:{line}: {name} from {target}"
        for path, module, line, target, names in _imports()
        if target.startswith("anylaunch.") and (_part(module) != _part(target) or not _part(module))
        for name in names
        if name.startswith("_")
    ]
    assert wrong == []
