"""The ``aws_batch`` and ``aws_sagemaker`` schedulers (public paths:
:mod:`anylaunch.schedulers.aws_batch_scheduler`,
:mod:`anylaunch.schedulers.aws_sagemaker_scheduler`); what both share is in
:mod:`~anylaunch.schedulers.aws.common`."""
