"""Ready-to-use utility components: they run well-known programs (``echo``, ``sh``,
``python``, ``touch``, ...) and serve as tutorial material or glue between workflow stages.

The default image of each is :data:`~anylaunch.components.DEFAULT_IMAGE` (``"."``, the current
directory), so ``anylaunch run -s local_cwd utils.echo --msg hi`` works as-is; pass ``--image``
for container schedulers. Python programs run as ``python3`` found on the ``PATH`` of the
replica, so the component stays portable across hosts and images.
"""

from __future__ import annotations

import os
import shlex
from typing import Annotated, Any

import anylaunch.specs as specs
from anylaunch.components import DEFAULT_IMAGE, PYTHON
from anylaunch.sdk import MissingDependencyError
from anylaunch.specs.errors import InvalidSpecError, did_you_mean
from anylaunch.specs.resources import resource

__all__ = ["binary", "booth", "copy", "echo", "hydra", "python", "sh", "touch"]

# the footprint of the small utilities that take no resource arguments
_SMALL_CPU, _SMALL_GPU, _SMALL_MEM_MB = 1, 0, 1024


def _small() -> specs.Resource:
    return specs.Resource(cpu=_SMALL_CPU, gpu=_SMALL_GPU, memMB=_SMALL_MEM_MB)


def _mounts(
    mounts: list[str] | None,
) -> list[specs.BindMount | specs.VolumeMount | specs.DeviceMount]:
    return specs.parse_mounts(mounts) if mounts else []


def _check_str(field_name: str, value: object, example: str) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidSpecError(field_name, value, "must be a non-empty str", f"pass e.g. {example}")


def echo(
    msg: str = "hello world", image: str = DEFAULT_IMAGE, num_replicas: int = 1
) -> specs.AppDef:
    """Echoes a message to stdout (runs ``echo``).

    >>> echo(msg="hi").roles[0].args
    ['hi']

    Args:
        msg: message to echo
        image: image to use (for the local schedulers, a directory)
        num_replicas: number of replicas to run

    Returns:
        the application definition
    """
    return specs.AppDef(
        name="echo",
        roles=[
            specs.Role(
                name="echo",
                image=image,
                entrypoint="echo",
                args=[msg],
                num_replicas=num_replicas,
                resource=_small(),
            )
        ],
    )


def touch(file: str, image: str = DEFAULT_IMAGE) -> specs.AppDef:
    """Touches a file (runs ``touch``).

    >>> touch("/tmp/marker").roles[0].args
    ['/tmp/marker']

    Args:
        file: file to create
        image: the image to use (for the local schedulers, a directory)

    Returns:
        the application definition
    """
    _check_str("file", file, "/tmp/marker")
    return specs.AppDef(
        name="touch",
        roles=[
            specs.Role(
                name="touch", image=image, entrypoint="touch", args=[file], resource=_small()
            )
        ],
    )


def sh(
    *args: str,
    image: str = DEFAULT_IMAGE,
    num_replicas: int = 1,
    cpu: int = 1,
    gpu: int = 0,
    memMB: int = 1024,
    h: str | None = None,
    env: dict[str, str] | None = None,
    max_retries: int = 0,
    mounts: list[str] | None = None,
    entrypoint: str | None = None,
) -> specs.AppDef:
    """Runs a command via ``sh -c`` (or directly with ``entrypoint``).

    Each argument is quoted, so ``$VAR`` and shell operators in an argument reach the
    command literally: ``utils.sh echo '$HOME'`` prints ``$HOME``.

    >>> sh("echo", "hello world").roles[0].args
    ['-c', "echo 'hello world'"]
    >>> app = sh("-l", entrypoint="ls")
    >>> (app.roles[0].entrypoint, app.roles[0].args)
    ('ls', ['-l'])

    Args:
        args: the command and its arguments
        image: image to use (for the local schedulers, a directory)
        num_replicas: number of replicas to run
        cpu: number of cpus per replica
        gpu: number of gpus per replica
        memMB: cpu memory in MB per replica
        h: a registered named resource (if specified takes precedence over cpu, gpu, memMB)
        env: environment variables to be passed to the run (e.g. ENV1=v1,ENV2=v2,ENV3=v3)
        max_retries: the number of scheduler retries allowed
        mounts: mounts to mount into the worker environment/container
            (ex. type=<bind/volume>,src=/host,dst=/job[,readonly]); see the scheduler's docs
        entrypoint: run this program with ``args`` instead of ``sh -c``

    Returns:
        the application definition
    """
    if entrypoint is None and not args:
        raise InvalidSpecError(
            "args", list(args), "no command given", "pass the command, e.g. utils.sh echo hi"
        )
    role_env = dict(env or {})
    role_env.setdefault("LOGLEVEL", os.getenv("LOGLEVEL", "WARNING"))
    if entrypoint is None:
        program, program_args = "sh", ["-c", shlex.join(args)]
    else:
        # a program (not a shell) receives each argument as is: nothing to quote
        program, program_args = entrypoint, list(args)
    return specs.AppDef(
        name="sh",
        roles=[
            specs.Role(
                name="sh",
                image=image,
                entrypoint=program,
                args=program_args,
                num_replicas=num_replicas,
                resource=resource(cpu=cpu, gpu=gpu, memMB=memMB, h=h),
                env=role_env,
                max_retries=max_retries,
                mounts=_mounts(mounts),
            )
        ],
    )


def python(
    *args: str,
    m: str | None = None,
    c: str | None = None,
    script: str | None = None,
    image: str = DEFAULT_IMAGE,
    name: str = "anylaunch_utils_python",
    cpu: int = 1,
    gpu: int = 0,
    memMB: int = 1024,
    h: str | None = None,
    num_replicas: int = 1,
    mounts: list[str] | None = None,
) -> specs.AppDef:
    """Runs ``python3`` with a module, a command or a script.

    Use ``--`` to separate the component's options from the program's arguments
    (``anylaunch run utils.python -m foo.main -- --arg value``).

    >>> python("--n", "2", m="foo.main").roles[0].args
    ['-m', 'foo.main', '--n', '2']
    >>> python(c="print(1)", script="x.py")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: m/c/script=... is invalid: exactly one of m, c and script must be set. Fix: ...

    Args:
        args: arguments passed to the program in sys.argv[1:]
        m: run library module as a script
        c: program passed as string (may error if the scheduler limits the length of args)
        script: .py script to run
        image: image to run on (for the local schedulers, a directory)
        name: name of the job
        cpu: number of cpus per replica
        gpu: number of gpus per replica
        memMB: cpu memory in MB per replica
        h: a registered named resource (if specified takes precedence over cpu, gpu, memMB)
        num_replicas: number of copies to run (each on its own container)
        mounts: mounts to mount into the worker environment/container
            (ex. type=<bind/volume>,src=/host,dst=/job[,readonly]); see the scheduler's docs

    Returns:
        the application definition
    """
    given = {k: v for k, v in (("m", m), ("c", c), ("script", script)) if v is not None}
    if len(given) != 1:
        raise InvalidSpecError(
            "m/c/script",
            given,
            "exactly one of m, c and script must be set",
            "pass -m my.module, -c 'print(1)' or --script main.py",
        )
    ((flag, program),) = given.items()
    _check_str(flag, program, "-m my.module")
    cmd = {"m": ["-m", program], "c": ["-c", program], "script": [program]}[flag]
    return specs.AppDef(
        name=name,
        roles=[
            specs.Role(
                name="python",
                image=image,
                entrypoint=PYTHON,
                args=[*cmd, *args],
                num_replicas=num_replicas,
                resource=resource(cpu=cpu, gpu=gpu, memMB=memMB, h=h),
                mounts=_mounts(mounts),
            )
        ],
    )


def binary(
    *args: str,
    entrypoint: str,
    name: str = "anylaunch_utils_binary",
    num_replicas: int = 1,
    image: str = DEFAULT_IMAGE,
    cpu: int = 1,
    gpu: int = 0,
    memMB: int = 1024,
    h: str | None = None,
) -> specs.AppDef:
    """Runs a program with the given arguments.

    >>> app = binary("-la", entrypoint="ls", num_replicas=2)
    >>> (app.roles[0].entrypoint, app.roles[0].args, app.roles[0].num_replicas)
    ('ls', ['-la'], 2)

    Args:
        args: arguments passed to the program in sys.argv[1:]
        entrypoint: the program to run (a path, or a name looked up on PATH)
        name: name of the job
        num_replicas: number of copies to run (each on its own container)
        image: image to run on (for the local schedulers, a directory)
        cpu: number of cpus per replica
        gpu: number of gpus per replica
        memMB: cpu memory in MB per replica
        h: a registered named resource (if specified takes precedence over cpu, gpu, memMB)

    Returns:
        the application definition
    """
    _check_str("entrypoint", entrypoint, "--entrypoint /bin/ls")
    return specs.AppDef(
        name=name,
        roles=[
            specs.Role(
                name="binary",
                image=image,
                entrypoint=entrypoint,
                args=list(args),
                num_replicas=num_replicas,
                resource=resource(cpu=cpu, gpu=gpu, memMB=memMB, h=h),
            )
        ],
    )


def copy(
    src: str, dst: str, image: str = DEFAULT_IMAGE, mounts: list[str] | None = None
) -> specs.AppDef:
    """Copies one file from ``src`` to ``dst``; both may be any fsspec URL.

    Runs ``python3 -m anylaunch.apps.utils.copy_main``, so ``anylaunch`` (and the fsspec
    implementation of each URL's protocol) must be installed where it runs. Directories and
    recursive copies are not supported.

    >>> copy("s3://bucket/a.txt", "/tmp/a.txt").roles[0].args
    ['-m', 'anylaunch.apps.utils.copy_main', '--src=s3://bucket/a.txt', '--dst=/tmp/a.txt']

    Args:
        src: the source fsspec file location
        dst: the destination fsspec file location
        image: the image that contains anylaunch (for the local schedulers, a directory)
        mounts: mounts to mount into the worker environment/container
            (ex. type=<bind/volume>,src=/host,dst=/job[,readonly]); see the scheduler's docs

    Returns:
        the application definition
    """
    _check_str("src", src, "s3://bucket/file.txt")
    _check_str("dst", dst, "/tmp/file.txt")
    return specs.AppDef(
        name="anylaunch-utils-copy",
        roles=[
            specs.Role(
                name="anylaunch-utils-copy",
                image=image,
                entrypoint=PYTHON,
                # --opt=value: a path starting with "-" must not read as an option
                args=["-m", "anylaunch.apps.utils.copy_main", f"--src={src}", f"--dst={dst}"],
                resource=_small(),
                mounts=_mounts(mounts),
            )
        ],
    )


def booth(
    x1: float,
    x2: float,
    trial_idx: int = 0,
    tracker_base: str = "/tmp/anylaunch-booth",
    image: str = DEFAULT_IMAGE,
) -> specs.AppDef:
    """Evaluates the Booth function ``f(x1, x2) = (x1 + 2*x2 - 7)^2 + (2*x1 + x2 - 5)^2``.

    The result is written as JSON ``{"booth_eval": f}`` to ``{tracker_base}/{trial_idx}``
    (any fsspec URL). Runs ``python3 -m anylaunch.apps.utils.booth_main``.

    >>> booth(1, -3e-05).roles[0].args[2:4]
    ['--x1=1', '--x2=-3e-05']

    Args:
        x1: x1
        x2: x2
        trial_idx: the trial's index (the result's key; ignore if not running hpo)
        tracker_base: URI of the tracker's base output directory (e.g. s3://foo/bar)
        image: the image that contains anylaunch (for the local schedulers, a directory)

    Returns:
        the application definition
    """
    _check_str("tracker_base", tracker_base, "/tmp/anylaunch-booth")
    return specs.AppDef(
        name="anylaunch-utils-booth",
        roles=[
            specs.Role(
                name="anylaunch-utils-booth",
                image=image,
                entrypoint=PYTHON,
                # --opt=value: argparse would take a value such as -1e-05 for an option
                args=[
                    "-m",
                    "anylaunch.apps.utils.booth_main",
                    f"--x1={x1}",
                    f"--x2={x2}",
                    f"--trial_idx={trial_idx}",
                    f"--tracker_base={tracker_base}",
                ],
                resource=_small(),
            )
        ],
    )


#: The macros a Hydra config can reference as ``${anylaunch.NAME:}`` (TorchX: ``torchx.NAME``).
HYDRA_MACROS = ("app_id", "replica_id", "rank0_env", "img_root")
_HYDRA_FIX = "pip install hydra-core where the component runs (the launching host)"


def hydra(
    *overrides: str,
    config_name: Annotated[str, "-cn"],
    config_dir: Annotated[str, "-cd"] = ".anylaunch",
) -> specs.AppDef:
    """Builds the AppDef a `Hydra <https://hydra.cc>`_ config declares.

    The config (``{config_dir}/{config_name}.yaml``) has an ``app`` key whose ``_target_`` is
    ``anylaunch.specs.AppDef``; other top-level keys (e.g. ``role``) serve config groups and
    interpolation. ``overrides`` are Hydra overrides (``app.roles.0.num_replicas=2``) and
    ``${anylaunch.app_id:}``, ``${anylaunch.replica_id:}``, ``${anylaunch.rank0_env:}`` and
    ``${anylaunch.img_root:}`` are the macros, substituted by the scheduler. Needs
    ``hydra-core`` (not installed with anylaunch)::

        app:
          _target_: anylaunch.specs.AppDef
          name: my_job
          roles:
            - _target_: anylaunch.specs.Role
              name: trainer
              image: "."
              entrypoint: echo
              args: [hello, "${anylaunch.app_id:}"]

    ``anylaunch run utils.hydra -cn my_job -- app.roles.0.num_replicas=3`` (or ``--config_name``)

    >>> hydra(config_name="")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: config_name='' is invalid: must be a non-empty str. Fix: ...
    >>> hydra(config_name="my_job", config_dir="/no/such/dir")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: config_dir='/no/such/dir' is invalid: is not a directory. Fix: ...

    Args:
        overrides: Hydra config overrides (e.g. app.roles.0.num_replicas=2)
        config_name: config file name in config_dir (without .yaml)
        config_dir: directory containing the configs (relative to the current directory)

    Returns:
        the application definition instantiated from the config

    Raises:
        InvalidSpecError: a missing config, a bad override, or an ``app`` that is not an AppDef.
        MissingDependencyError: ``hydra-core`` is not installed.
    """
    _check_str("config_name", config_name, "--config_name my_job")
    _check_str("config_dir", config_dir, "--config_dir .anylaunch")
    for i, override in enumerate(overrides):
        _check_str(f"overrides[{i}]", override, "app.roles.0.num_replicas=2")
    directory = os.path.abspath(os.path.expanduser(config_dir))
    if not os.path.isdir(directory):
        raise InvalidSpecError(
            "config_dir", config_dir, "is not a directory", "pass the directory of your configs"
        )
    names = sorted(f[: -len(".yaml")] for f in os.listdir(directory) if f.endswith(".yaml"))
    if config_name.removesuffix(".yaml") not in names:
        raise InvalidSpecError(
            "config_name",
            config_name,
            f"{directory} has no {config_name.removesuffix('.yaml')}.yaml."
            + did_you_mean(config_name, names),
            f"pass one of {names} (without .yaml)" if names else "write the config first",
        )
    app = _instantiate_app(_compose(directory, config_name, list(overrides)))
    if not isinstance(app, specs.AppDef):
        raise InvalidSpecError(
            f"{config_name}.app",
            type(app).__name__,
            "does not build an AppDef",
            "set app._target_: anylaunch.specs.AppDef (and _target_: anylaunch.specs.Role "
            "for each role)",
        )
    return app


def _hydra_module(name: str) -> Any:
    """``hydra``'s (or ``omegaconf``'s) module ``name``, imported on first use (untyped: the
    package is optional)."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        raise MissingDependencyError(
            "utils.hydra needs the Python package 'hydra-core', which is not installed. "
            f"Fix: {_HYDRA_FIX}"
        ) from None


def _compose(directory: str, config_name: str, overrides: list[str]) -> Any:
    """The composed config (an OmegaConf ``DictConfig``) with anylaunch's macro resolvers."""
    hydra_ = _hydra_module("hydra")
    errors = _hydra_module("hydra.errors")
    omegaconf = _hydra_module("omegaconf")
    for name in HYDRA_MACROS:
        # a literal ${name} (escaped, so OmegaConf does not resolve it again): the scheduler
        # substitutes it, per replica
        value = getattr(specs.macros, name)
        omegaconf.OmegaConf.register_new_resolver(
            f"anylaunch.{name}", lambda value=value: f"\\{value}", replace=True
        )
    if _hydra_module("hydra.core.global_hydra").GlobalHydra.instance().is_initialized():
        raise InvalidSpecError(
            "utils.hydra",
            config_name,
            "Hydra is already initialized in this process (called from inside a Hydra app?)",
            "build the AppDef outside the Hydra app, or compose it with the app's own config",
        )
    try:
        with hydra_.initialize_config_dir(config_dir=directory, version_base="1.3"):
            return hydra_.compose(
                config_name=config_name.removesuffix(".yaml"), overrides=overrides
            )
    except errors.HydraException as e:
        raise InvalidSpecError(
            "overrides" if overrides else "config_name",
            overrides or config_name,
            f"Hydra cannot compose {config_name}: {' '.join(str(e).split())}",
            "write each override as key=value (+key=value adds a key, ~key removes one)",
        ) from None


def _instantiate_app(cfg: Any) -> object:
    errors = _hydra_module("hydra.errors")
    if "app" not in cfg:
        raise InvalidSpecError(
            "app",
            sorted(str(k) for k in cfg),
            "the config has no app key",
            "put the job under app: with _target_: anylaunch.specs.AppDef",
        )
    try:
        app: object = _hydra_module("hydra.utils").instantiate(cfg.app, _convert_="all")
    except errors.InstantiationException as e:
        raise InvalidSpecError(
            "app._target_",
            cfg.app.get("_target_") if hasattr(cfg.app, "get") else None,
            f"cannot be instantiated: {' '.join(str(e).split())}",
            "check each _target_ and its fields",
        ) from None
    return app
