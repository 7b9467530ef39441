"""Fixtures of the AWS scheduler tests: the moto server and its Batch queue (see moto_env)."""

from tests.schedulers.aws.moto_env import (  # noqa: F401 (fixtures)
    batch_docker,
    batch_queue,
    moto_aws,
    moto_server,
)
