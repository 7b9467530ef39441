"""TorchX's module path of the ``aws_sagemaker`` scheduler: its public names, from
:mod:`anylaunch.schedulers.aws.sagemaker` (the code, and its description)."""

from anylaunch.schedulers.aws.sagemaker import (
    AWSSageMakerOpts,
    AWSSageMakerScheduler,
    SageMakerJobRequest,
    create_scheduler,
)

__all__ = ["AWSSageMakerOpts", "AWSSageMakerScheduler", "SageMakerJobRequest", "create_scheduler"]
