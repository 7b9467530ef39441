"""TorchX's module path of the ``aws_batch`` scheduler.

It exposes the scheduler (:class:`AWSBatchScheduler`), its run options (:class:`AWSBatchOpts`),
its dry-run request (:class:`BatchJobRequest`) and the registry's factory
(:func:`create_scheduler`). The code, and the description of the scheduler, are in
:mod:`anylaunch.schedulers.aws.batch`.
"""

from anylaunch.schedulers.aws.batch import AWSBatchScheduler, create_scheduler
from anylaunch.schedulers.aws.batch_request import AWSBatchOpts, BatchJobRequest

__all__ = [
    "AWSBatchOpts",
    "AWSBatchScheduler",
    "BatchJobRequest",
    "create_scheduler",
]
