"""A TorchX-style plugin package ported to anylaunch by renaming its imports.

It has a scheduler (``myplug``: local_cwd that stamps what it was given into each role's
env), a named resource with fractional slices (``myplug_cpu``, ``myplug_cpu_4`` ...
``myplug_cpu_1``) and a component (``myplug.hello``), each in its group of the
``anylaunch_plugins`` namespace package (no ``__init__.py`` anywhere in it).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

SCHEDULER = '''\
from typing import Any, Mapping

from anylaunch.plugins import register
from anylaunch.schedulers import Scheduler
from anylaunch.schedulers.local_scheduler import LocalScheduler
from anylaunch.specs import AppDef, CfgVal


class MyPlugScheduler(LocalScheduler):
    """local_cwd, plus the scheduler name and the role's named resource in its env."""

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__(session_name, state_dir=kwargs.get("state_dir"))
        self.backend = "myplug"

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> Any:
        for role in app.roles:
            role.env["MYPLUG_SCHEDULER"] = self.backend
            role.env["MYPLUG_RESOURCE"] = str(role.resource.get_resource_name())
            role.env["MYPLUG_FRACTIONAL"] = str(role.resource.is_fractional())
            role.env["MYPLUG_MEM"] = str(role.resource.memMB)
        return super()._submit_dryrun(app, cfg)


@register.scheduler()
def myplug(session_name: str, **kwargs: Any) -> Scheduler[Any]:
    return MyPlugScheduler(session_name, **kwargs)
'''

NAMED_RESOURCE = """\
from anylaunch.plugins import WHOLE, halve_mem_down_to, register
from anylaunch.specs import Resource


@register.named_resource(fractionals=halve_mem_down_to(minGiB=1))
def myplug_cpu(fractional: float = WHOLE) -> Resource:
    return Resource(cpu=int(4 * fractional), gpu=0, memMB=int(4096 * fractional))
"""

COMPONENT = '''\
import anylaunch.specs as specs
from anylaunch.plugins import register


@register.component()
def hello(msg: str, h: str = "myplug_cpu") -> specs.AppDef:
    """Says msg, and what the scheduler and the named resource put in the env.

    Args:
        msg: what to say
        h: the named resource to run with
    """
    report = (
        'echo "$0 scheduler=$MYPLUG_SCHEDULER resource=$MYPLUG_RESOURCE '
        'fractional=$MYPLUG_FRACTIONAL mem=$MYPLUG_MEM"'
    )
    return specs.AppDef(
        name="hello",
        roles=[
            specs.Role(
                name="hello",
                image=".",
                entrypoint="sh",
                args=["-c", report, msg],
                resource=specs.resource(h=h),
            )
        ],
    )
'''

PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "myplug"
version = "0.1.0"
dependencies = ["anylaunch"]

[tool.hatch.build.targets.wheel]
packages = ["anylaunch_plugins"]
"""


def write_plugin_package(root: Path) -> Path:
    """Writes the package's sources under ``root`` and returns ``root``."""
    files = {
        "pyproject.toml": PYPROJECT,
        "anylaunch_plugins/schedulers/myplug.py": SCHEDULER,
        "anylaunch_plugins/named_resources/myplug.py": NAMED_RESOURCE,
        "anylaunch_plugins/components/myplug.py": COMPONENT,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root
