"""Every public module path of TorchX HEAD (``torchx.util`` aside) imports under its anylaunch
name, and the TorchX names of the modules that exist for porting users are there.

A path not ported yet is marked ``xfail(strict=True)``: the mark turns into a failure, to
delete, once the module lands.
"""

from __future__ import annotations

import importlib

import pytest

#: TorchX HEAD's public modules (torchx/**, without tests, examples, torchx.util and private
#: modules), with ``torchx`` read as ``anylaunch``.
TORCHX_MODULES = (
    "torchx",
    "torchx.apps.utils.booth_main",
    "torchx.apps.utils.copy_main",
    "torchx.cli",
    "torchx.cli.argparse_util",
    "torchx.cli.cmd_base",
    "torchx.cli.cmd_cancel",
    "torchx.cli.cmd_configure",
    "torchx.cli.cmd_delete",
    "torchx.cli.cmd_describe",
    "torchx.cli.cmd_list",
    "torchx.cli.cmd_log",
    "torchx.cli.cmd_run",
    "torchx.cli.cmd_runopts",
    "torchx.cli.cmd_status",
    "torchx.cli.cmd_tracker",
    "torchx.cli.colors",
    "torchx.cli.main",
    "torchx.components",
    "torchx.components.component_test_base",
    "torchx.components.dist",
    "torchx.components.interpret",
    "torchx.components.metrics",
    "torchx.components.serve",
    "torchx.components.structured_arg",
    "torchx.components.train",
    "torchx.components.utils",
    "torchx.deprecations",
    "torchx.distributed",
    "torchx.notebook",
    "torchx.plugins",
    "torchx.runner",
    "torchx.runner.api",
    "torchx.runner.config",
    "torchx.runner.events",
    "torchx.runner.events.api",
    "torchx.runner.events.handlers",
    "torchx.runtime",
    "torchx.runtime.tracking",
    "torchx.runtime.tracking.api",
    "torchx.schedulers",
    "torchx.schedulers.api",
    "torchx.schedulers.aws_batch_scheduler",
    "torchx.schedulers.aws_sagemaker_scheduler",
    "torchx.schedulers.devices",
    "torchx.schedulers.docker_scheduler",
    "torchx.schedulers.ids",
    "torchx.schedulers.kubernetes_mcad_scheduler",
    "torchx.schedulers.kubernetes_scheduler",
    "torchx.schedulers.local_scheduler",
    "torchx.schedulers.lsf_scheduler",
    "torchx.schedulers.slurm_scheduler",
    "torchx.schedulers.streams",
    "torchx.settings",
    "torchx.specs",
    "torchx.specs.api",
    "torchx.specs.builders",
    "torchx.specs.capabilities",
    "torchx.specs.file_linter",
    "torchx.specs.finder",
    "torchx.specs.metadata_keys",
    "torchx.specs.named_resources_aws",
    "torchx.specs.named_resources_generic",
    "torchx.specs.overlays",
    "torchx.tracker",
    "torchx.tracker.api",
    "torchx.tracker.backend.fsspec",
    "torchx.tracker.mlflow",
    "torchx.version",
    "torchx.workspace",
    "torchx.workspace.api",
    "torchx.workspace.dir_workspace",
    "torchx.workspace.docker_workspace",
)

#: Paths not ported yet (issue 31), each with what it holds in TorchX: none left.
NOT_PORTED: dict[str, str] = {}


def anylaunch_name(torchx_path: str) -> str:
    return "anylaunch" + torchx_path.removeprefix("torchx")


@pytest.mark.parametrize(
    "torchx_path",
    [
        pytest.param(
            p,
            marks=[pytest.mark.xfail(strict=True, reason=f"not ported yet: {NOT_PORTED[p]}")]
            if p in NOT_PORTED
            else [],
        )
        for p in TORCHX_MODULES
    ],
)
def test_the_torchx_module_path_imports(torchx_path: str) -> None:
    importlib.import_module(anylaunch_name(torchx_path))


def test_not_ported_names_only_torchx_modules() -> None:
    assert set(NOT_PORTED) <= set(TORCHX_MODULES)


#: The modules added for TorchX's paths, and TorchX's public names in each.
ADDED = {
    "anylaunch.schedulers.ids": ["make_unique", "random_id", "random_uint64"],
    "anylaunch.schedulers.streams": ["Tee"],
    "anylaunch.schedulers.devices": [
        "DEVICES",
        "efa_to_devicemounts",
        "get_device_mounts",
        "neuron_to_devicemounts",
        "to_devicemounts",
    ],
    "anylaunch.components.structured_arg": ["StructuredJArgument", "StructuredNameArgument"],
    "anylaunch.components.component_test_base": ["ComponentTestCase"],
    "anylaunch.specs.finder": [
        "ComponentNotFoundException",
        "ComponentValidationException",
        "ComponentsFinder",
        "get_component",
        "get_components",
    ],
    "anylaunch.version": ["__version__", "ANYLAUNCH_IMAGE"],
    "anylaunch.settings": [
        "ENV_ANYLAUNCHCONFIG",
        "ENV_ANYLAUNCH_JOB_ID",
        "ENV_ANYLAUNCH_PARENT_RUN_ID",
        "ENV_ANYLAUNCH_TRACKERS",
    ],
    "anylaunch.distributed": [
        "init_pg",
        "is_local_rank0",
        "is_rank0",
        "local_cuda_device",
        "local_device",
        "local_rank",
        "on_local_rank0_first",
        "on_rank0_first",
        "rank",
        "world_size",
    ],
    "anylaunch.runtime.tracking": ["FsspecResultTracker", "ResultTracker"],
    "anylaunch.runtime.tracking.api": ["FsspecResultTracker", "ResultTracker"],
    "anylaunch.cli.argparse_util": [
        "ArgOnceAction",
        "anylaunchconfig",
        "anylaunchconfig_list",
        "anylaunchconfig_run",
    ],
    "anylaunch.cli.colors": ["BLUE", "ENDC", "GRAY", "GREEN", "ORANGE", "prefix_container_name"],
    "anylaunch.components.metrics": ["tensorboard"],
    "anylaunch.deprecations": ["deprecated", "deprecated_module"],
    "anylaunch.notebook": ["get_workspace", "workspacefile"],
    # TorchX HEAD's torchx.specs.__all__, whole (TORCHX_* read as ANYLAUNCH_*)
    "anylaunch.specs": [
        "ALL",
        "ANYLAUNCH_CONTEXT_NAME",
        "ANYLAUNCH_HOME",
        "AppDef",
        "AppDryRunInfo",
        "AppHandle",
        "AppState",
        "AppStatus",
        "BindMount",
        "CapabilityKey",
        "CfgVal",
        "DeviceMount",
        "InvalidRunConfigException",
        "MISSING",
        "MalformedAppHandleException",
        "NA",
        "NONE",
        "NULL_RESOURCE",
        "ParsedAppHandle",
        "ReplicaState",
        "ReplicaStatus",
        "Resource",
        "RetryPolicy",
        "Role",
        "RoleStatus",
        "UnknownAppException",
        "UnknownSchedulerException",
        "VolumeMount",
        "Workspace",
        "app_metadata",
        "cases",
        "get_named_resources",
        "get_type_name",
        "is_terminal",
        "macros",
        "make_app_handle",
        "materialize_appdef",
        "named_resources",
        "parse_app_handle",
        "parse_mounts",
        "resource",
        "runopt",
        "runopts",
    ],
    "anylaunch.specs.metadata_keys": ["ANYLAUNCH_CONTEXT_NAME", "NA", "app_metadata"],
    "anylaunch.specs.capabilities": ["CapabilityKey"],
    "anylaunch.tracker.mlflow": ["MLflowTracker", "create_tracker"],
}


@pytest.mark.parametrize("module", sorted(ADDED))
def test_an_added_module_exports_the_torchx_names(module: str) -> None:
    imported = importlib.import_module(module)
    exported = set(imported.__all__)
    assert set(ADDED[module]) <= exported
    assert all(hasattr(imported, name) for name in exported), "__all__ names what is there"
