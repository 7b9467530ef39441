"""Every scheduler's ``schedule`` takes only a request its own ``submit_dryrun`` made (one check,
in the ``Scheduler`` base), before it contacts its backend."""

from __future__ import annotations

import pytest

from anylaunch.schedulers import get_scheduler_factories, get_scheduler_factory
from anylaunch.specs import AppDef, AppDryRunInfo, Resource, Role
from anylaunch.specs.errors import InvalidSpecError

BUILTIN = [
    "local_cwd",
    "local_docker",
    "slurm",
    "kubernetes",
    "kubernetes_mcad",
    "aws_batch",
    "aws_sagemaker",
    "lsf",
]


def test_the_list_covers_every_builtin_scheduler() -> None:
    assert set(BUILTIN) <= set(get_scheduler_factories())


@pytest.mark.parametrize("name", BUILTIN)
def test_schedule_refuses_a_request_it_did_not_make(name: str) -> None:
    scheduler = get_scheduler_factory(name)("own-request")
    with pytest.raises(InvalidSpecError, match=f"is not a request of the {name} scheduler"):
        scheduler.schedule(AppDryRunInfo({"not": "a request"}, str))


def test_the_kubernetes_schedulers_refuse_each_others_requests() -> None:
    app = AppDef("a", [Role("w", "busybox:latest", entrypoint="true", resource=Resource(1, 0, 64))])
    kubernetes = get_scheduler_factory("kubernetes")("own-request")
    mcad = get_scheduler_factory("kubernetes_mcad")("own-request")
    with pytest.raises(InvalidSpecError, match="not a request of the kubernetes_mcad scheduler"):
        mcad.schedule(kubernetes.submit_dryrun(app, {}))
    with pytest.raises(InvalidSpecError, match="not a request of the kubernetes scheduler"):
        kubernetes.schedule(mcad.submit_dryrun(app, {}))
