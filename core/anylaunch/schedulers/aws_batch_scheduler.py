"""TorchX's module path of the ``aws_batch`` scheduler: its public names, from
:mod:`anylaunch.schedulers.aws.batch` (the code, and its description)."""

from anylaunch.schedulers.aws.batch import AWSBatchScheduler, create_scheduler
from anylaunch.schedulers.aws.batch_request import AWSBatchOpts, BatchJobRequest

__all__ = ["AWSBatchOpts", "AWSBatchScheduler", "BatchJobRequest", "create_scheduler"]
