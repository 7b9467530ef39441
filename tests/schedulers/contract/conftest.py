"""The backends of every scheduler, as the contract suite's fixtures (see kits.py), and the
``kit`` fixture: one scheduler on its backend, its apps deleted after the test."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integrations.backend_targets import (  # noqa: F401 (fixtures)
    batch_docker,
    batch_queue,
    busybox_image,
    docker_client,
    kube_client,
    kube_namespace,
    kubelet,
    moto_aws,
    moto_server,
    slurm_cluster,
)
from tests.schedulers.contract.kits import SCHEDULERS, Kit, make_kit
from tests.schedulers.lsf.conftest import lsf_cluster  # noqa: F401 (fixture)


@pytest.fixture(params=SCHEDULERS)
def kit(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Kit]:
    kit = make_kit(request.param, request, tmp_path, monkeypatch)
    yield kit
    session = kit.scheduler.session_name
    for app in kit.scheduler.list(kit.cfg):
        if app.app_handle.split("/")[2] == session:
            kit.scheduler.delete(app.app_id)
    kit.scheduler.close()
