"""Metrics (TorchX's ``torchx.components.metrics``).

We recommend TensorBoard: log metrics directly to cloud storage alongside the model, and, as
the model trains, run a TensorBoard server on your machine to watch its progress:

.. code-block:: shell-session

    $ tensorboard --logdir provider://path/to/logs

or launch the :func:`tensorboard` component as a step of your pipeline.

References:

* PyTorch TensorBoard tutorial: https://pytorch.org/tutorials/intermediate/tensorboard_tutorial.html
* PyTorch Lightning loggers: https://lightning.ai/docs/pytorch/stable/extensions/logging.html
"""

from __future__ import annotations

import math

import anylaunch.specs as specs
from anylaunch.components import DEFAULT_IMAGE, PYTHON
from anylaunch.specs.errors import InvalidSpecError

__all__ = ["tensorboard"]

#: TensorBoard's own default port.
TENSORBOARD_PORT = 6006


def tensorboard(
    logdir: str,
    image: str = DEFAULT_IMAGE,
    timeout: float = 60 * 60,
    port: int = TENSORBOARD_PORT,
    start_on_file: str = "",
    exit_on_file: str = "",
) -> specs.AppDef:
    """Runs a TensorBoard server that renders the logs in ``logdir``.

    TensorBoard is a service, so it must be told when to stop: after ``timeout`` seconds, or
    when the ``exit_on_file`` path is created. It starts when ``start_on_file`` is created (at
    once if not given). The paths are fsspec paths, polled for existence. The role runs
    ``python3 -m anylaunch.apps.utils.process_monitor``, so the image needs ``anylaunch`` and
    ``tensorboard``.

    >>> app = tensorboard(logdir="s3://bucket/run1/logs", exit_on_file="s3://bucket/run1/done")
    >>> app.roles[0].port_map
    {'http': 6006}
    >>> app.roles[0].args[-6:]
    ['tensorboard', '--bind_all', '--port', '6006', '--logdir', 's3://bucket/run1/logs']

    Args:
        logdir: fsspec path to the TensorBoard logs
        image: image to use
        timeout: maximum time to run before exiting (seconds)
        port: port TensorBoard serves on
        start_on_file: start the server when the fsspec path is created
        exit_on_file: shutdown the server when the fsspec path is created

    Returns:
        the application definition
    """
    if not isinstance(logdir, str) or not logdir.strip():
        raise InvalidSpecError(
            "tensorboard.logdir", logdir, "must be a non-empty path", "pass e.g. s3://bucket/logs"
        )
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not (math.isfinite(timeout) and timeout > 0)
    ):
        raise InvalidSpecError(
            "tensorboard.timeout",
            timeout,
            "must be a finite number of seconds > 0",
            "pass e.g. --timeout 3600 (stop the server with --exit_on_file instead of waiting)",
        )
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise InvalidSpecError(
            "tensorboard.port", port, "must be a port number from 1 to 65535", "pass e.g. 6006"
        )
    for field, value in (("start_on_file", start_on_file), ("exit_on_file", exit_on_file)):
        if not isinstance(value, str):
            raise InvalidSpecError(
                f"tensorboard.{field}",
                value,
                "must be a str",
                "pass an fsspec path, or '' for none",
            )
    return specs.AppDef(
        name="tensorboard",
        roles=[
            specs.Role(
                name="tensorboard",
                image=image,
                entrypoint=PYTHON,
                args=[
                    "-m",
                    "anylaunch.apps.utils.process_monitor",
                    "--timeout",
                    str(timeout),
                    "--start_on_file",
                    start_on_file,
                    "--exit_on_file",
                    exit_on_file,
                    "--",
                    "tensorboard",
                    "--bind_all",
                    "--port",
                    str(port),
                    "--logdir",
                    logdir,
                ],
                port_map={"http": port},
            )
        ],
    )
