"""Components for inference and serving tools such as
`torchserve <https://pytorch.org/serve/>`_.
"""

from __future__ import annotations

import anylaunch.specs as specs
from anylaunch.components import DEFAULT_IMAGE, PYTHON
from anylaunch.specs.errors import InvalidSpecError, did_you_mean

__all__ = ["torchserve"]

_MODEL_DOWNLOAD_PORT = 8222


def torchserve(
    model_path: str,
    management_api: str,
    image: str = DEFAULT_IMAGE,
    params: dict[str, str] | None = None,
    dryrun: bool = False,
    port: int = _MODEL_DOWNLOAD_PORT,
) -> specs.AppDef:
    """Deploys the provided model to the given torchserve management API endpoint.

    The job downloads the model archive, serves it over HTTP on ``port`` (torchserve must be
    able to reach the job there) and registers it with torchserve. It runs
    ``python3 -m anylaunch.apps.serve.serve``, so the image needs ``anylaunch``.

    >>> app = torchserve(
    ...     model_path="s3://your-bucket/your-model.mar",
    ...     management_api="http://torchserve:8081",
    ...     params={"model_name": "resnet", "initial_workers": "1"},
    ... )
    >>> app.name, app.roles[0].port_map
    ('anylaunch-torchserve', {'model-download': 8222})
    >>> app.roles[0].args[-2:]
    ['--model_name=resnet', '--initial_workers=1']

    Args:
        model_path: the fsspec path to the model archive file
        management_api: the URL to the root of the torchserve management API
        image: image that contains anylaunch (for the local schedulers, a directory)
        params: torchserve register-model parameters (e.g. model_name=resnet,initial_workers=1);
            see https://pytorch.org/serve/management_api.html#register-a-model
        dryrun: start the app, but do not perform the actual work
        port: port the model is served on while torchserve downloads it

    Returns:
        the application definition
    """
    if not isinstance(model_path, str) or not model_path:
        raise InvalidSpecError(
            "model_path", model_path, "must be a non-empty str", "pass e.g. s3://bucket/model.mar"
        )
    if not isinstance(management_api, str) or not management_api.startswith(
        ("http://", "https://")
    ):
        raise InvalidSpecError(
            "management_api",
            management_api,
            "is not an http(s) URL",
            "pass the management API's root URL, e.g. http://torchserve:8081",
        )
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise InvalidSpecError("port", port, "is not a TCP port", "use a port in 1-65535")

    # --opt=value throughout: a value starting with "-" must not read as an option
    args = ["-m", "anylaunch.apps.serve.serve", f"--model_path={model_path}"]
    args += [f"--management_api={management_api}", f"--port={port}"]
    if params:
        # imported here: the app module pulls in http.server and urllib
        from anylaunch.apps.serve.serve import TORCHSERVE_PARAMS

        for param, value in params.items():
            if param not in TORCHSERVE_PARAMS:
                raise InvalidSpecError(
                    "params",
                    param,
                    f"is not a torchserve register-model parameter.{did_you_mean(param, TORCHSERVE_PARAMS)}",
                    f"use some of {', '.join(TORCHSERVE_PARAMS)}",
                )
            args.append(f"--{param}={value}")
    if dryrun:
        args.append("--dryrun")

    return specs.AppDef(
        name="anylaunch-torchserve",
        roles=[
            specs.Role(
                name="worker",
                image=image,
                entrypoint=PYTHON,
                args=args,
                port_map={"model-download": port},
                resource=specs.Resource(cpu=1, gpu=0, memMB=1024),
            )
        ],
    )
