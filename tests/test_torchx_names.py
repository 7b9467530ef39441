"""Every public name of TorchX HEAD's modules imports from the same path under anylaunch, as
the same kind of thing, and TorchX's public constants have TorchX's values (issue 31).

The names are hard-coded from TorchX's main branch (meta-pytorch/torchx, the latest stored
version of each file; read from the source, never from its tests): a module's ``__all__``
where it has one, otherwise its public top-level names (classes, functions, constants; not
imports, loggers or type variables). ``torchx`` reads as ``anylaunch``, ``TORCHX`` as
``ANYLAUNCH`` and ``TorchX``/``Torchx`` as ``Anylaunch``. The module list is
:data:`tests.test_torchx_paths.TORCHX_MODULES`.

A name anylaunch leaves out or changes on purpose is in :data:`DIFFERENCES` with the reason
(each one is on the differences page, ``docs/torchx/differences.md``). A gap not closed yet is
in :data:`PENDING`, marked ``xfail(strict=True)``: the mark fails, to delete, once it is
closed.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import re
import sys
import types
from typing import Any

import pytest

from tests.test_torchx_paths import TORCHX_MODULES, anylaunch_name

# ---- TorchX HEAD's public names: module -> {name: kind} ----------------------------------
# kinds: C class, F function (any callable that is not a class), V value (constants, tables,
# objects), M module

#: Modules TorchX HEAD has dropped (anylaunch keeps them: their names are anylaunch's own).
DROPPED = {
    "torchx.schedulers.aws_batch_scheduler",
    "torchx.schedulers.aws_sagemaker_scheduler",
    "torchx.schedulers.kubernetes_mcad_scheduler",
    "torchx.schedulers.lsf_scheduler",
}

#: Modules whose names are not audited here, with why.
NOT_AUDITED = {
    # docs-only packages: no public names of their own
    "torchx.cli": "the package holds only docs",
    "torchx.runtime": "the package holds only docs",
    # components: another branch owns anylaunch.components (only main entry points checked)
    "torchx.components": "components are audited with anylaunch.components",
    "torchx.components.dist": "components are audited with anylaunch.components",
    "torchx.components.interpret": "components are audited with anylaunch.components",
    "torchx.components.serve": "components are audited with anylaunch.components",
    "torchx.components.train": "components are audited with anylaunch.components",
    "torchx.components.utils": "components are audited with anylaunch.components",
}


def _kinds(spec: str) -> dict[str, str]:
    """``"C:AppDef F:resource"`` -> ``{"AppDef": "C", "resource": "F"}``."""
    return {name: kind for kind, _, name in (item.partition(":") for item in spec.split())}


_AWS_RESOURCES = [
    "p3_2xlarge",
    "p3_8xlarge",
    "p3_16xlarge",
    "p3dn_24xlarge",
    "p4d_24xlarge",
    "p4de_24xlarge",
    "p5_48xlarge",
    "p5e_48xlarge",
    "p5en_48xlarge",
    "t3_medium",
    "m5_2xlarge",
    "c5_18xlarge",
    "g4dn_xlarge",
    "g4dn_2xlarge",
    "g4dn_4xlarge",
    "g4dn_8xlarge",
    "g4dn_12xlarge",
    "g4dn_16xlarge",
    "g4dn_metal",
    "g5_xlarge",
    "g5_2xlarge",
    "g5_4xlarge",
    "g5_8xlarge",
    "g5_12xlarge",
    "g5_16xlarge",
    "g5_24xlarge",
    "g5_48xlarge",
    "g6e_xlarge",
    "g6e_2xlarge",
    "g6e_4xlarge",
    "g6e_8xlarge",
    "g6e_16xlarge",
    "g6e_12xlarge",
    "g6e_24xlarge",
    "g6e_48xlarge",
    "trn1_2xlarge",
    "trn1_32xlarge",
    "inf2_xlarge",
    "inf2_8xlarge",
    "inf2_24xlarge",
    "inf2_48xlarge",
]

NAMES: dict[str, dict[str, str]] = {
    "torchx": _kinds("V:__version__ V:IMAGE"),
    "torchx.apps.utils.booth_main": _kinds("F:main"),
    "torchx.apps.utils.copy_main": _kinds("F:main"),
    "torchx.cli.argparse_util": _kinds(
        "C:ArgOnceAction C:torchxconfig C:torchxconfig_list C:torchxconfig_run"
    ),
    "torchx.cli.cmd_base": _kinds("C:SubCommand C:AppHandleSubCommand"),
    "torchx.cli.cmd_cancel": _kinds("C:CmdCancel"),
    "torchx.cli.cmd_configure": _kinds("C:CmdConfigure"),
    "torchx.cli.cmd_delete": _kinds("C:CmdDelete"),
    "torchx.cli.cmd_describe": _kinds("C:CmdDescribe"),
    "torchx.cli.cmd_list": _kinds("C:CmdList"),
    "torchx.cli.cmd_log": _kinds("C:CmdLog"),
    "torchx.cli.cmd_run": _kinds("C:CmdBuiltins C:CmdRun"),
    "torchx.cli.cmd_runopts": _kinds("C:CmdRunopts"),
    "torchx.cli.cmd_status": _kinds("C:CmdStatus"),
    "torchx.cli.cmd_tracker": _kinds("C:CmdTracker"),
    "torchx.cli.colors": _kinds("V:GREEN V:BLUE V:ORANGE V:GRAY V:ENDC F:prefix_container_name"),
    "torchx.cli.main": _kinds(
        "V:sub_parser_description F:get_default_sub_cmds F:get_sub_cmds F:create_parser "
        "F:run_main F:main"
    ),
    "torchx.components.component_test_base": _kinds("C:ComponentTestCase"),
    "torchx.components.metrics": _kinds("F:tensorboard"),
    "torchx.components.structured_arg": _kinds("C:StructuredJArgument C:StructuredNameArgument"),
    "torchx.deprecations": _kinds("F:deprecated F:deprecated_module"),
    "torchx.distributed": _kinds(
        "F:init_pg F:is_local_rank0 F:is_rank0 F:local_cuda_device F:local_device "
        "F:local_rank F:on_local_rank0_first F:on_rank0_first F:rank F:world_size"
    ),
    "torchx.notebook": _kinds("F:get_workspace F:workspacefile"),
    # __all__
    "torchx.plugins": _kinds(
        "C:register C:resource_tags F:powers_of_two_gpus F:halve_mem_down_to V:WHOLE V:HALF "
        "V:QUARTER V:EIGHTH V:SIXTEENTH C:RegistrationError C:PluginType C:PluginRegistry "
        "F:registry"
    ),
    "torchx.runner": _kinds("F:get_runner C:Runner"),
    "torchx.runner.api": _kinds(
        "V:NONE F:get_configured_trackers C:Runner C:ComponentRunner F:get_component_runner "
        "F:get_runner"
    ),
    "torchx.runner.config": _kinds(
        "V:CONFIG_FILE V:CONFIG_PREFIX_DELIM V:DEFAULT_CONFIG_DIRS F:dump F:apply "
        "F:load_sections F:get_configs F:get_config F:find_configs F:load"
    ),
    "torchx.runner.events": _kinds(
        "F:record C:log_event C:SourceType C:TorchxEvent F:get_logging_handler"
    ),
    "torchx.runner.events.api": _kinds("C:SourceType C:TorchxEvent"),
    "torchx.runner.events.handlers": _kinds("F:get_logging_handler"),
    "torchx.runtime.tracking": _kinds("C:FsspecResultTracker C:ResultTracker"),
    "torchx.runtime.tracking.api": _kinds("C:FsspecResultTracker C:ResultTracker"),
    "torchx.schedulers": _kinds(
        "V:DEFAULT_SCHEDULER_MODULES C:SchedulerFactory F:get_scheduler_factories "
        "F:get_default_scheduler_name"
    ),
    "torchx.schedulers.api": _kinds(
        "V:DAYS_IN_2_WEEKS C:StructuredOpts C:Stream C:DescribeAppResponse C:ListAppResponse "
        "C:Scheduler F:filter_regex F:split_lines F:split_lines_iterator"
    ),
    "torchx.schedulers.devices": _kinds(
        "F:to_devicemounts F:neuron_to_devicemounts F:efa_to_devicemounts V:DEVICES "
        "F:get_device_mounts"
    ),
    "torchx.schedulers.docker_scheduler": _kinds(
        "C:DockerScheduler C:DockerJob F:create_scheduler C:DockerContainer F:has_docker"
    ),
    "torchx.schedulers.ids": _kinds(
        "V:START_CANDIDATES V:END_CANDIDATES F:make_unique F:random_uint64 F:random_id"
    ),
    "torchx.schedulers.kubernetes_scheduler": _kinds(
        "C:KubernetesScheduler C:KubernetesJob F:create_scheduler F:app_to_resource "
        "F:pod_labels F:role_to_pod F:sanitize_for_serialization"
    ),
    "torchx.schedulers.local_scheduler": _kinds(
        "C:LocalScheduler C:ImageProvider C:CWDImageProvider C:LocalDirectoryImageProvider "
        "F:create_scheduler C:LogIterator C:PopenRequest C:ReplicaParam C:SignalException"
    ),
    "torchx.schedulers.slurm_scheduler": _kinds(
        "C:SlurmScheduler C:SlurmBatchRequest C:SlurmReplicaRequest F:create_scheduler"
    ),
    "torchx.schedulers.streams": _kinds("C:Tee"),
    "torchx.settings": _kinds(
        "V:ENV_TORCHX_TRACKERS V:ENV_TORCHX_PARENT_RUN_ID V:ENV_TORCHX_JOB_ID "
        "V:ENV_TORCHXCONFIG V:TORCHX_INTERNAL_SESSION_ID V:ENV_TORCHX_IMAGE"
    ),
    # __all__ of HEAD's lazy-named-resources torchx/specs/__init__.py, and GiB
    "torchx.specs": _kinds(
        "C:app_metadata C:AppDef C:AppDryRunInfo C:AppHandle C:AppState C:AppStatus "
        "C:BindMount C:CapabilityKey V:CfgVal C:DeviceMount F:get_type_name F:is_terminal "
        "C:macros V:MISSING V:NA V:NONE V:NULL_RESOURCE C:Package C:PackageKind "
        "F:parse_app_handle C:ParsedAppHandle C:ReplicaState C:ReplicaStatus C:Resource "
        "C:RetryPolicy C:Role C:RoleStatus C:runopt C:runopts C:cases V:UNKNOWN "
        "C:UnknownAppException C:UnknownSchedulerException F:validate_packages "
        "C:InvalidRunConfigException C:MalformedAppHandleException C:VolumeMount F:resource "
        "F:get_named_resources V:named_resources F:make_app_handle F:materialize_appdef "
        "F:parse_mounts V:ALL V:TORCHX_CONTEXT_NAME F:TORCHX_HOME C:Workspace V:GiB"
    ),
    "torchx.specs.api": _kinds(
        "V:YELLOW_BOLD V:RESET F:TORCHX_HOME C:Resource V:NULL_RESOURCE V:ALL V:MISSING "
        "V:NONE V:UNKNOWN C:macros C:RetryPolicy C:MountType C:BindMount C:VolumeMount "
        "C:DeviceMount C:Workspace C:Role C:AppDef C:AppState F:is_terminal F:is_started "
        "C:ReplicaState C:ReplicaStatus C:RoleStatus C:AppStatus C:AppStatusError V:CfgVal "
        "C:AppDryRunInfo F:get_type_name C:cases C:runopt C:runopts "
        "C:InvalidRunConfigException C:MalformedAppHandleException "
        "C:UnknownSchedulerException C:AppHandle C:ParsedAppHandle C:UnknownAppException "
        "F:parse_app_handle"
    ),
    "torchx.specs.builders": _kinds(
        "C:ComponentArgs F:parse_args F:component_args_from_str F:materialize_appdef "
        "F:make_app_handle F:parse_mounts"
    ),
    "torchx.specs.capabilities": _kinds("C:CapabilityKey"),
    "torchx.specs.file_linter": _kinds(
        "C:TorchXArgumentHelpFormatter F:get_fn_docstring C:LinterMessage "
        "C:ComponentFunctionValidator F:is_primitive F:get_generic_type F:get_optional_type "
        "C:ArgTypeValidator C:ReturnTypeValidator C:ComponentFnVisitor F:validate"
    ),
    "torchx.specs.finder": _kinds(
        "C:ComponentValidationException C:ComponentNotFoundException C:ComponentsFinder "
        "F:is_namespace_package F:is_package F:module_relname C:ModuleComponentsFinder "
        "C:CustomComponentsFinder F:get_components F:get_component F:get_builtin_source"
    ),
    "torchx.specs.metadata_keys": _kinds("V:TORCHX_CONTEXT_NAME V:NA C:app_metadata"),
    "torchx.specs.named_resources_aws": {
        **_kinds(
            "V:EFA_DEVICE V:NEURON_DEVICE V:MEM_TAX V:K8S_ITYPE V:GiB "
            "F:instance_type_from_resource V:NAMED_RESOURCES"
        ),
        **{f"aws_{r}": "F" for r in _AWS_RESOURCES},
    },
    "torchx.specs.named_resources_generic": _kinds("V:GiB V:NAMED_RESOURCES"),
    "torchx.specs.overlays": _kinds(
        "F:PUT F:JOIN F:DEL F:apply_overlay F:get_overlay F:set_overlay F:validate_overlay"
    ),
    "torchx.tracker": _kinds("C:AppRun F:app_run_from_env"),
    "torchx.tracker.api": _kinds(
        "V:ENV_TORCHX_TRACKERS V:ENV_TORCHX_PARENT_RUN_ID V:ENV_TORCHX_JOB_ID C:TrackerSource "
        "C:TrackerArtifact C:AppRunTrackableSource C:Lineage C:TrackerBase "
        "F:tracker_config_env_var_name F:build_trackers F:trackers_from_environ C:AppRun"
    ),
    "torchx.tracker.backend.fsspec": _kinds("F:generate_filename C:FsspecTracker F:create"),
    "torchx.tracker.mlflow": _kinds("C:MLflowTracker F:create_tracker"),
    "torchx.version": _kinds("V:__version__ V:TORCHX_IMAGE"),
    "torchx.workspace": _kinds(
        "C:MultiWorkspaceMixin C:WorkspaceMixin F:pin_workspace_images F:walk_workspace"
    ),
    "torchx.workspace.api": _kinds(
        "V:TORCHX_IGNORE C:PkgInfo C:WorkspaceBuilder C:WorkspaceMixin "
        "F:pin_workspace_images F:walk_workspace"
    ),
    "torchx.workspace.dir_workspace": _kinds("C:DirWorkspaceMixin"),
    "torchx.workspace.docker_workspace": _kinds("C:DockerWorkspaceMixin"),
}

# ---- TorchX's values (with the renames applied) ------------------------------------------

#: ``(module, name) -> value`` for TorchX's public constants.
CONSTANTS: dict[tuple[str, str], object] = {
    ("torchx.settings", "ENV_TORCHX_TRACKERS"): "ANYLAUNCH_TRACKERS",
    ("torchx.settings", "ENV_TORCHX_PARENT_RUN_ID"): "ANYLAUNCH_PARENT_RUN_ID",
    ("torchx.settings", "ENV_TORCHX_JOB_ID"): "ANYLAUNCH_JOB_ID",
    ("torchx.settings", "ENV_TORCHXCONFIG"): "ANYLAUNCHCONFIG",
    ("torchx.settings", "TORCHX_INTERNAL_SESSION_ID"): "ANYLAUNCH_INTERNAL_SESSION_ID",
    ("torchx.settings", "ENV_TORCHX_IMAGE"): "ANYLAUNCH_IMAGE",
    ("torchx.tracker.api", "ENV_TORCHX_TRACKERS"): "ANYLAUNCH_TRACKERS",
    ("torchx.tracker.api", "ENV_TORCHX_PARENT_RUN_ID"): "ANYLAUNCH_PARENT_RUN_ID",
    ("torchx.tracker.api", "ENV_TORCHX_JOB_ID"): "ANYLAUNCH_JOB_ID",
    ("torchx.specs", "GiB"): 1024,
    ("torchx.specs", "ALL"): "all",
    ("torchx.specs", "MISSING"): "<MISSING>",
    ("torchx.specs", "NONE"): "<NONE>",
    ("torchx.specs", "UNKNOWN"): "<UNKNOWN>",
    ("torchx.specs", "NA"): "<<NA>>",
    ("torchx.specs", "TORCHX_CONTEXT_NAME"): "ANYLAUNCH_CONTEXT_NAME",
    ("torchx.specs.api", "ALL"): "all",
    ("torchx.specs.api", "MISSING"): "<MISSING>",
    ("torchx.specs.api", "NONE"): "<NONE>",
    ("torchx.specs.api", "YELLOW_BOLD"): "\033[1;33m",
    ("torchx.specs.api", "RESET"): "\033[0m",
    ("torchx.specs.metadata_keys", "TORCHX_CONTEXT_NAME"): "ANYLAUNCH_CONTEXT_NAME",
    ("torchx.specs.metadata_keys", "NA"): "<<NA>>",
    ("torchx.specs.named_resources_aws", "EFA_DEVICE"): "vpc.amazonaws.com/efa",
    ("torchx.specs.named_resources_aws", "NEURON_DEVICE"): "aws.amazon.com/neurondevice",
    ("torchx.specs.named_resources_aws", "MEM_TAX"): 0.96,
    ("torchx.specs.named_resources_aws", "K8S_ITYPE"): "node.kubernetes.io/instance-type",
    ("torchx.specs.named_resources_aws", "GiB"): 983,  # int(1024 * MEM_TAX)
    ("torchx.specs.named_resources_generic", "GiB"): 1024,
    ("torchx.schedulers.api", "DAYS_IN_2_WEEKS"): 14,
    ("torchx.schedulers.ids", "START_CANDIDATES"): "bcdfghjklmnpqrstvwxz",
    ("torchx.schedulers.ids", "END_CANDIDATES"): "bcdfghjklmnpqrstvwxz012345679",
    ("torchx.runner.api", "NONE"): "<NONE>",
    ("torchx.runner.config", "CONFIG_FILE"): ".anylaunchconfig",
    ("torchx.runner.config", "CONFIG_PREFIX_DELIM"): ":",
    ("torchx.workspace.api", "TORCHX_IGNORE"): ".anylaunchignore",
    # on a terminal; "" when colours are off (TorchX: stdout is not a terminal)
    ("torchx.cli.colors", "GREEN"): "\033[32m",
    ("torchx.cli.colors", "BLUE"): "\033[34m",
    ("torchx.cli.colors", "ORANGE"): "\033[38:2:238:76:44m",
    ("torchx.cli.colors", "GRAY"): "\033[2m",
    ("torchx.cli.colors", "ENDC"): "\033[0m",
    ("torchx.cli.main", "sub_parser_description"): (
        "Use the following commands to run operations, e.g.:\nanylaunch run ${JOB_NAME}\n"
    ),
}

#: ``(module, class) -> {member: value}``: enums and TorchX's constant holders.
MEMBERS: dict[tuple[str, str], dict[str, object]] = {
    ("torchx.specs", "AppState"): {
        "UNSUBMITTED": 0,
        "SUBMITTED": 1,
        "PENDING": 2,
        "RUNNING": 3,
        "SUCCEEDED": 4,
        "FAILED": 5,
        "CANCELLED": 6,
        "UNKNOWN": 7,
    },
    ("torchx.specs", "RetryPolicy"): {
        "REPLICA": "REPLICA",
        "APPLICATION": "APPLICATION",
        "ROLE": "ROLE",
    },
    ("torchx.specs.api", "MountType"): {"BIND": "bind", "VOLUME": "volume", "DEVICE": "device"},
    ("torchx.specs", "macros"): {
        "img_root": "${img_root}",
        "app_id": "${app_id}",
        "replica_id": "${replica_id}",
        "rank0_env": "${rank0_env}",
    },
    ("torchx.specs", "app_metadata"): {
        "CONTEXT": "anylaunch/context",
        "VERSION": "anylaunch/version",
        "SCHEDULER": "anylaunch/scheduler",
        "ROLES_PREFIX": "anylaunch/roles.",
    },
    ("torchx.schedulers.api", "Stream"): {
        "STDOUT": "stdout",
        "STDERR": "stderr",
        "COMBINED": "combined",
    },
    ("torchx.runner.events.api", "SourceType"): {
        "UNKNOWN": "<unknown>",
        "INTERNAL": "INTERNAL",
        "EXTERNAL": "EXTERNAL",
    },
}

#: ``(cpu, gpu, memMB, devices)`` of each AWS named resource, TorchX's arithmetic: memory in
#: units of ``named_resources_aws.GiB`` (983 MiB, after the 4% memory tax).
_EFA, _NEURON = "vpc.amazonaws.com/efa", "aws.amazon.com/neurondevice"
AWS_RESOURCES: dict[str, tuple[int, int, int, dict[str, int]]] = {
    "aws_t3.medium": (2, 0, 4, {}),
    "aws_m5.2xlarge": (8, 0, 32, {}),
    "aws_c5.18xlarge": (72, 0, 142, {}),
    "aws_p3.2xlarge": (8, 1, 61, {}),
    "aws_p3.8xlarge": (32, 4, 244, {}),
    "aws_p3.16xlarge": (64, 8, 488, {}),
    "aws_p3dn.24xlarge": (96, 8, 768, {_EFA: 1}),
    "aws_p4d.24xlarge": (96, 8, 1152, {_EFA: 4}),
    "aws_p4de.24xlarge": (96, 8, 1152, {_EFA: 4}),
    "aws_p5.48xlarge": (192, 8, 2048, {_EFA: 32}),
    "aws_p5e.48xlarge": (192, 8, 2048, {_EFA: 32}),
    "aws_p5en.48xlarge": (192, 8, 2048, {_EFA: 16}),
    "aws_g4dn.xlarge": (4, 1, 16, {}),
    "aws_g4dn.2xlarge": (8, 1, 32, {}),
    "aws_g4dn.4xlarge": (16, 1, 64, {}),
    "aws_g4dn.8xlarge": (32, 1, 128, {_EFA: 1}),
    "aws_g4dn.12xlarge": (48, 4, 192, {_EFA: 1}),
    "aws_g4dn.16xlarge": (64, 1, 256, {_EFA: 1}),
    "aws_g4dn.metal": (96, 8, 384, {_EFA: 1}),
    "aws_g5.xlarge": (4, 1, 16, {}),
    "aws_g5.2xlarge": (8, 1, 32, {}),
    "aws_g5.4xlarge": (16, 1, 64, {}),
    "aws_g5.8xlarge": (32, 1, 128, {_EFA: 1}),
    "aws_g5.12xlarge": (48, 4, 192, {_EFA: 1}),
    "aws_g5.16xlarge": (64, 1, 256, {_EFA: 1}),
    "aws_g5.24xlarge": (96, 4, 384, {_EFA: 1}),
    "aws_g5.48xlarge": (192, 8, 768, {_EFA: 1}),
    "aws_g6e.xlarge": (4, 1, 32, {}),
    "aws_g6e.2xlarge": (8, 1, 64, {}),
    "aws_g6e.4xlarge": (16, 1, 128, {}),
    "aws_g6e.8xlarge": (32, 1, 256, {}),
    "aws_g6e.12xlarge": (48, 4, 384, {}),
    "aws_g6e.16xlarge": (64, 1, 512, {}),
    "aws_g6e.24xlarge": (96, 4, 768, {_EFA: 2}),
    "aws_g6e.48xlarge": (192, 8, 1536, {_EFA: 4}),
    "aws_trn1.2xlarge": (8, 0, 32, {_NEURON: 1}),
    "aws_trn1.32xlarge": (128, 0, 512, {_EFA: 8, _NEURON: 16}),
    "aws_inf2.xlarge": (4, 0, 16, {_NEURON: 1}),
    "aws_inf2.8xlarge": (32, 0, 128, {_NEURON: 1}),
    "aws_inf2.24xlarge": (96, 0, 384, {_NEURON: 6}),
    "aws_inf2.48xlarge": (192, 0, 768, {_NEURON: 12}),
}

#: ``(cpu, gpu, memMB)`` of each generic named resource.
GENERIC_RESOURCES: dict[str, tuple[int, int, int]] = {
    "gpu.small": (8, 1, 32 * 1024),
    "gpu.medium": (16, 2, 64 * 1024),
    "gpu.large": (32, 4, 128 * 1024),
    "gpu.xlarge": (64, 8, 256 * 1024),
    "cpu.nano": (1, 0, 512),
    "cpu.micro": (1, 0, 1024),
    "cpu.small": (1, 0, 2 * 1024),
    "cpu.medium": (2, 0, 4 * 1024),
    "cpu.large": (2, 0, 8 * 1024),
    "cpu.xlarge": (8, 0, 32 * 1024),
}

#: TorchX's built-in scheduler modules (``torchx.schedulers.DEFAULT_SCHEDULER_MODULES``).
SCHEDULER_MODULES = {
    "local_docker": "anylaunch.schedulers.docker_scheduler",
    "local_cwd": "anylaunch.schedulers.local_scheduler",
    "slurm": "anylaunch.schedulers.slurm_scheduler",
    "kubernetes": "anylaunch.schedulers.kubernetes_scheduler",
    "kubernetes_mcad": "anylaunch.schedulers.kubernetes_mcad_scheduler",
    "aws_batch": "anylaunch.schedulers.aws_batch_scheduler",
    "aws_sagemaker": "anylaunch.schedulers.aws_sagemaker_scheduler",
    "lsf": "anylaunch.schedulers.lsf_scheduler",
}

# ---- what differs on purpose, and what is not closed yet ---------------------------------

#: ``(module, name) -> reason``: anylaunch differs on purpose (see the differences page).
#: The name is then checked only as far as the reason says.
DIFFERENCES: dict[tuple[str, str], str] = {
    ("torchx.specs", "cases"): "a module, not a class; calls look the same",
    ("torchx.specs.api", "cases"): "a module, not a class; calls look the same",
    ("torchx.version", "TORCHX_IMAGE"): "'.', the built-ins' default image: none is published",
    ("torchx.runner.config", "DEFAULT_CONFIG_DIRS"): "looked up on each call ($HOME, cwd)",
    ("torchx.schedulers.ids", "START_CANDIDATES"): (
        "ids draw from all lowercase letters and digits, no candidate alphabets"
    ),
    ("torchx.schedulers.ids", "END_CANDIDATES"): (
        "ids draw from all lowercase letters and digits, no candidate alphabets"
    ),
    ("torchx.tracker.api", "Lineage"): "no lineage(): TrackerBase has none",
    ("torchx.workspace.api", "PkgInfo"): "deprecated upstream ('fork if you depend on it')",
    ("torchx.workspace.api", "WorkspaceBuilder"): (
        "deprecated upstream ('fork if you depend on it')"
    ),
    ("torchx.specs.finder", "ModuleComponentsFinder"): (
        "discovery lives in anylaunch.components; the concrete finders are not ported"
    ),
    ("torchx.specs.finder", "CustomComponentsFinder"): (
        "discovery lives in anylaunch.components; the concrete finders are not ported"
    ),
}

#: ``(module, name) -> why``: gaps not closed yet (``xfail(strict=True)``).
PENDING: dict[tuple[str, str], str] = {}

# Left out on purpose (docs/torchx/differences.md says why), so in DIFFERENCES:
DIFFERENCES.update(
    {
        **{
            ("torchx.specs", n): "HEAD's __all__ lists it; TorchX's sources do not define it"
            for n in ("Package", "PackageKind", "validate_packages")
        },
        ("torchx.workspace", "MultiWorkspaceMixin"): (
            "HEAD's __init__ imports it; TorchX's sources do not define it"
        ),
        ("torchx.cli.cmd_base", "AppHandleSubCommand"): (
            "anylaunch's base for handle commands is AppSubCommand (run_on)"
        ),
        # each backend is a translator plus a thin client on the shared base: TorchX's
        # per-backend request and job classes (a Volcano Job, Popen replicas, ...) have
        # other shapes here (KubernetesRequest, the local supervisor's request record)
        **{
            ("torchx.schedulers.kubernetes_scheduler", n): "backend internals: other shapes"
            for n in (
                "KubernetesJob",
                "app_to_resource",
                "pod_labels",
                "role_to_pod",
                "sanitize_for_serialization",
            )
        },
        **{
            ("torchx.schedulers.local_scheduler", n): "backend internals: other shapes"
            for n in (
                "ImageProvider",
                "CWDImageProvider",
                "LocalDirectoryImageProvider",
                "LogIterator",
                "PopenRequest",
                "ReplicaParam",
                "SignalException",
            )
        },
        **{
            ("torchx.schedulers.docker_scheduler", n): "backend internals: other shapes"
            for n in ("DockerJob", "DockerContainer")
        },
        ("torchx.schedulers.slurm_scheduler", "SlurmReplicaRequest"): (
            "backend internals: other shapes"
        ),
    }
)

# ---- the checks --------------------------------------------------------------------------


def anylaunch_spelling(name: str) -> str:
    """TorchX's name of a thing, as anylaunch spells it."""
    name = re.sub("TorchX|Torchx", "Anylaunch", name)
    return name.replace("TORCHX", "ANYLAUNCH").replace("torchx", "anylaunch")


def kind_of(obj: object) -> str:
    """C, F, V or M (see :data:`NAMES`)."""
    if isinstance(obj, types.ModuleType):
        return "M"
    if inspect.isclass(obj):
        return "C"
    if isinstance(obj, (types.UnionType, types.GenericAlias)) or type(obj).__module__ == "typing":
        return "V"  # a type alias such as CfgVal
    if callable(obj) and not isinstance(obj, enum.Enum):
        return "F"
    return "V"


def _cases() -> list[Any]:
    cases = []
    for module, names in NAMES.items():
        for name, kind in names.items():
            key = (module, name)
            marks = []
            if key in PENDING:
                marks.append(pytest.mark.xfail(strict=True, reason=PENDING[key]))
            cases.append(pytest.param(module, name, kind, id=f"{module}.{name}", marks=marks))
    return cases


def _lookup(module: str, name: str) -> object:
    imported = importlib.import_module(anylaunch_name(module))
    target = anylaunch_spelling(name)
    assert hasattr(imported, target), f"{anylaunch_name(module)} has no {target}"
    return getattr(imported, target)


def test_every_torchx_module_is_audited_or_set_aside() -> None:
    audited = set(NAMES) | DROPPED | set(NOT_AUDITED)
    assert set(TORCHX_MODULES) == audited


def test_differences_and_pending_name_audited_names() -> None:
    for module, name in [*DIFFERENCES, *PENDING, *CONSTANTS, *MEMBERS]:
        assert name in NAMES[module], (module, name)
    assert not set(DIFFERENCES) & set(PENDING)


@pytest.mark.parametrize(("module", "name", "kind"), _cases())
def test_the_torchx_name_imports_as_the_same_kind(module: str, name: str, kind: str) -> None:
    imported = importlib.import_module(anylaunch_name(module))
    if (module, name) in DIFFERENCES:
        # a documented difference: the name may be left out, or be a module
        obj = getattr(imported, anylaunch_spelling(name), None)
        if obj is None:
            return
        if name == "cases":
            assert isinstance(obj, types.ModuleType)  # a module of the same functions
            assert callable(obj.snake_to_camel) and callable(obj.camel_to_snake)
            return
    obj = _lookup(module, name)
    assert kind_of(obj) == kind, f"{anylaunch_spelling(name)} is {kind_of(obj)}, TorchX {kind}"


@pytest.mark.parametrize(
    ("module", "name", "value"),
    [
        pytest.param(
            m,
            n,
            v,
            id=f"{m}.{n}",
            marks=[pytest.mark.xfail(strict=True, reason=PENDING[(m, n)])]
            if (m, n) in PENDING
            else [],
        )
        for (m, n), v in CONSTANTS.items()
    ],
)
def test_the_torchx_constant_has_torchx_value(module: str, name: str, value: object) -> None:
    if (module, name) in DIFFERENCES:
        imported = importlib.import_module(anylaunch_name(module))
        assert not hasattr(imported, anylaunch_spelling(name))  # left out, not redefined
        return
    actual = _lookup(module, name)
    if module == "torchx.cli.colors":
        from anylaunch.cli.colors import colors_enabled

        # decided at import from stdout (anylaunch also honours NO_COLOR and TERM=dumb)
        value = value if colors_enabled(sys.stdout) else ""
    assert type(actual) is type(value) and actual == value


@pytest.mark.parametrize(("module", "cls"), sorted(MEMBERS), ids=lambda v: str(v))
def test_the_torchx_members_have_torchx_values(module: str, cls: str) -> None:
    holder = _lookup(module, cls)
    for member, value in MEMBERS[(module, cls)].items():
        attr = getattr(holder, member)
        actual = attr.value if isinstance(attr, enum.Enum) else attr
        assert actual == value, f"{cls}.{member}"


def test_the_named_resource_tables_have_torchx_keys_and_values() -> None:
    import anylaunch.specs.named_resources_aws as aws
    import anylaunch.specs.named_resources_generic as generic

    assert set(AWS_RESOURCES) <= set(aws.NAMED_RESOURCES)  # anylaunch adds instance types
    for name, (cpu, gpu, mem, devices) in AWS_RESOURCES.items():
        res = aws.NAMED_RESOURCES[name]()
        assert (res.cpu, res.gpu, res.memMB, res.devices) == (cpu, gpu, mem * 983, devices), name
        assert res.capabilities[aws.K8S_ITYPE] == name.removeprefix("aws_")
    assert set(generic.NAMED_RESOURCES) == set(GENERIC_RESOURCES)
    for name, (cpu, gpu, mem) in GENERIC_RESOURCES.items():
        res = generic.NAMED_RESOURCES[name]()
        assert (res.cpu, res.gpu, res.memMB) == (cpu, gpu, mem), name


def test_the_specs_named_resources_hold_both_tables_and_null() -> None:
    import anylaunch.specs as specs

    for name in [*AWS_RESOURCES, *GENERIC_RESOURCES, "NULL", "MISSING"]:
        assert name in specs.named_resources, name
    null = specs.named_resources["NULL"]
    assert (null.cpu, null.gpu, null.memMB) == (-1, -1, -1) and null.is_null()


def test_the_other_torchx_tables_have_torchx_keys() -> None:
    import anylaunch.schedulers as schedulers
    import anylaunch.schedulers.devices as devices

    assert schedulers.DEFAULT_SCHEDULER_MODULES == SCHEDULER_MODULES  # order: local_cwd first
    assert set(devices.DEVICES) == {_EFA, _NEURON}
