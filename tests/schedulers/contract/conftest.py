"""The backends of every scheduler, as the contract suite's fixtures (see kits.py)."""

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
from tests.schedulers.lsf.conftest import lsf_cluster  # noqa: F401 (fixture)
