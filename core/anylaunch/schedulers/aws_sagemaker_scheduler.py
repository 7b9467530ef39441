"""TorchX's module path of the ``aws_sagemaker`` scheduler.

It exposes the scheduler (:class:`AWSSageMakerScheduler`), its run options
(:class:`AWSSageMakerOpts`), its dry-run request (:class:`SageMakerJobRequest`) and the
registry's factory (:func:`create_scheduler`). The code, and the description of the scheduler,
are in :mod:`anylaunch.schedulers.aws.sagemaker`.
"""

from anylaunch.schedulers.aws.sagemaker import (
    AWSSageMakerOpts,
    AWSSageMakerScheduler,
    SageMakerJobRequest,
    create_scheduler,
)

__all__ = [
    "AWSSageMakerOpts",
    "AWSSageMakerScheduler",
    "SageMakerJobRequest",
    "create_scheduler",
]
