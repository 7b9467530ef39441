"""Helpers shared by the AWS schedulers (``aws_batch``, ``aws_sagemaker``).

- boto3 clients built from boto3's standard credential chain (profile, environment, instance
  or task role; ``AWS_ENDPOINT_URL`` and friends are honoured), imported lazily;
- unique job names, AWS tags that identify an app, shell quoting for generated commands;
- images that exist only locally (``sha256:...``) mapped to ``image_repo`` and pushed;
- requests checked against botocore's service model (lengths, patterns, enums) at dryrun;
- CloudWatch Logs read as lines, with ``since``/``until`` and tailing.

Nothing here logs or stores credentials: boto3 resolves them inside its own client.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

from anylaunch.schedulers.api import Scheduler, Stream, split_lines
from anylaunch.schedulers.common.app_ids import random_suffix
from anylaunch.schedulers.common.job_metadata import job_metadata, plain_values
from anylaunch.sdk import require_sdk
from anylaunch.specs.api import AppDef
from anylaunch.specs.errors import (
    AnylaunchError,
    BackendUnreachableError,
    InvalidRunConfigException,
    InvalidSpecError,
)
from anylaunch.specs.metadata_keys import app_metadata
from anylaunch.specs.runopts import CfgVal

__all__ = [
    "APP_NAME_TAG",
    "SCHEDULER_TAG",
    "SESSION_TAG",
    "VERSION_TAG",
    "AWSRequestError",
    "app_tags",
    "check_arn",
    "check_request",
    "double_quote",
    "follow_log_stream",
    "is_client_error",
    "make_client",
    "make_job_name",
    "plan_image_pushes",
    "push_images",
    "refused",
    "tag_value",
    "to_millis",
]

log: logging.Logger = logging.getLogger(__name__)

# arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE (IAM ARNs have no region)
_ARN = re.compile(
    r"^arn:aws(?:-[a-z]+)*:(?P<service>[a-z0-9-]+):(?P<region>[a-z0-9-]*):"
    r"(?P<account>\d{12}):(?P<resource>[^\s]+)$"
)
# the path and name of an IAM role: 1-64 of [\w+=,.@-] after an optional /path/
_ROLE_RESOURCE = re.compile(r"^role/(?:[\w+=,.@-]+/)*[\w+=,.@-]{1,64}$")
_QUEUE_RESOURCE = re.compile(r"^job-queue/[A-Za-z0-9_-]{1,128}$")


def check_arn(option: str, value: str | None, kind: str) -> None:
    """Refuses a run option that AWS would reject as a malformed ARN.

    Args:
        option: the run option's name (named by the error)
        value: its value (None: not set)
        kind: ``"role"`` (an IAM role ARN) or ``"job-queue"`` (an AWS Batch job queue ARN)

    >>> check_arn("role_arn", "arn:aws:iam::123456789012:role/sm", "role")
    >>> check_arn("role_arn", "arn:aws:iam::1234:role/sm", "role")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidRunConfigException: role_arn='arn:aws:iam::1234:role/sm' is invalid: is not an IAM role ARN. Fix: pass e.g. arn:aws:iam::123456789012:role/my-role (a 12-digit account id, no region)
    """
    if value is None:
        return
    match = _ARN.match(value) if isinstance(value, str) else None
    if kind == "role":
        good = (
            match is not None
            and match["service"] == "iam"
            and not match["region"]
            and _ROLE_RESOURCE.match(match["resource"]) is not None
        )
        what, example = "an IAM role ARN", "arn:aws:iam::123456789012:role/my-role"
        example += " (a 12-digit account id, no region)"
    else:
        good = (
            match is not None
            and match["service"] == "batch"
            and bool(match["region"])
            and _QUEUE_RESOURCE.match(match["resource"]) is not None
        )
        what = "an AWS Batch job queue ARN"
        example = "the queue's name, or arn:aws:batch:us-east-1:123456789012:job-queue/my-queue"
    if not good or len(value) > 2048:
        raise InvalidRunConfigException(option, value, f"is not {what}", f"pass e.g. {example}")


#: Tags put on every job (and job definition) an AWS scheduler creates.
SCHEDULER_TAG = app_metadata.SCHEDULER
APP_NAME_TAG = "anylaunch/app-name"
SESSION_TAG = "anylaunch/session"
VERSION_TAG = app_metadata.VERSION

_TAG_CHARS = re.compile(r"[^\w .:/=+\-@]+")


class AWSRequestError(AnylaunchError):
    """AWS refused a request (the message names the operation and AWS's reason)."""


class AWSUnreachableError(AWSRequestError, BackendUnreachableError):
    """AWS could not be asked: no region or credentials, or no connection to the endpoint."""


def unreachable(error: BaseException, scheduler: str) -> AWSUnreachableError | None:
    """The error to raise when ``error`` means AWS could not be asked at all; None otherwise.

    >>> from botocore.exceptions import NoCredentialsError
    >>> str(unreachable(NoCredentialsError(), "aws_batch")).split(". Fix")[0]
    'cannot reach the aws_batch backend: Unable to locate credentials'
    >>> unreachable(ValueError("x"), "aws_batch") is None
    True
    """
    from botocore.exceptions import (
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        ProxyConnectionError,
    )

    if isinstance(error, NoCredentialsError):
        fix = "configure AWS credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID, or an instance role)"
    elif isinstance(error, (EndpointConnectionError, ConnectTimeoutError, ProxyConnectionError)):
        fix = "check the network path to AWS and AWS_ENDPOINT_URL (if set)"
    else:
        return None
    return AWSUnreachableError(scheduler, str(error), fix)


def make_client(service: str, scheduler: str) -> Any:
    """Creates a boto3 client for ``service`` from the standard credential chain.

    The region comes from the environment or profile (``AWS_DEFAULT_REGION``, ``AWS_PROFILE``,
    ``~/.aws/config``); endpoints may be overridden with ``AWS_ENDPOINT_URL[_<SERVICE>]``.

    Raises:
        MissingDependencyError: boto3 is not installed.
        AWSRequestError: no region is configured.
    """
    boto3 = require_sdk("boto3", extra="aws", scheduler=scheduler)
    from botocore.exceptions import NoRegionError

    try:
        return boto3.session.Session().client(service)
    except NoRegionError:
        raise AWSUnreachableError(
            scheduler,
            "no AWS region is configured",
            "set AWS_DEFAULT_REGION (or region in the AWS_PROFILE's ~/.aws/config)",
        ) from None


class AWSScheduler(Scheduler[Mapping[str, CfgVal]]):
    """What the AWS schedulers share: a service client and a CloudWatch Logs client, each
    made on first use from boto3's standard credential chain (or given), and one combined log
    stream per host (AWS keeps stdout and stderr together).

    Args:
        backend: the scheduler's name
        session_name: goes into app handles
        service: the boto3 service of the jobs (``batch``, ``sagemaker``)
        client: a boto3 client of ``service`` to use
        log_client: a boto3 ``logs`` client to use
    """

    log_streams = (Stream.COMBINED,)
    #: boto3 clients of the service and of CloudWatch Logs; no AWS call is made until one is
    #: needed.
    factory_kwargs = ("client", "log_client")

    def __init__(
        self, backend: str, session_name: str, service: str, client: Any, log_client: Any
    ) -> None:
        super().__init__(backend, session_name)
        self._service = service
        self._client = client
        self._log_client = log_client

    @property
    def client(self) -> Any:
        """The boto3 client of the jobs' service (created on first use); a call that cannot
        reach AWS raises :class:`AWSUnreachableError`."""
        if self._client is None:
            self._client = make_client(self._service, self.backend)
        return _Reaching(self._client, self.backend)

    @property
    def log_client(self) -> Any:
        """The boto3 CloudWatch Logs client (created on first use), as :attr:`client`."""
        if self._log_client is None:
            self._log_client = make_client("logs", self.backend)
        return _Reaching(self._log_client, self.backend)


class _Reaching:
    """A boto3 client whose API calls raise :class:`AWSUnreachableError` when AWS could not be
    asked at all: the one seam where every AWS call of a scheduler passes."""

    def __init__(self, client: Any, scheduler: str) -> None:
        self._client = client
        self._scheduler = scheduler

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name.startswith("_") or not callable(attr):
            return attr  # meta, exceptions, ...
        scheduler = self._scheduler

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attr(*args, **kwargs)
            except Exception as e:
                cause = unreachable(e, scheduler)
                if cause is None:
                    raise
                raise cause from e

        return call


def is_client_error(error: BaseException, *codes: str) -> bool:
    """True if ``error`` is a botocore ClientError with one of ``codes`` (any code if none).

    >>> is_client_error(ValueError("x"))
    False
    """
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return False
    code = response.get("Error", {}).get("Code", "")
    return not codes or code in codes


@contextlib.contextmanager
def refused(what: str, fix: str = "") -> Iterator[None]:
    """Around an AWS request: a client error (AWS said no) is raised as an
    :class:`AWSRequestError` ``"{what}: {error}{fix}"``; other errors pass unchanged.

    >>> with refused("SageMaker refused training job j"):
    ...     raise ValueError("not AWS")
    Traceback (most recent call last):
    ValueError: not AWS
    """
    try:
        yield
    except Exception as e:
        if is_client_error(e):
            raise AWSRequestError(f"{what}: {e}{fix}") from e
        raise


def make_job_name(app_name: str, max_len: int, underscores: bool = True) -> str:
    """A unique job name from ``app_name``: allowed characters only, starts with a letter or
    digit, ends with ``-`` and 8 random lowercase alphanumerics, at most ``max_len`` long.

    >>> name = make_job_name("my train/job v2", 128)
    >>> name[:-8], len(name)
    ('my-train-job-v2-', 24)
    >>> make_job_name("__x__", 63, underscores=False)[:2]
    'x-'
    """
    allowed = r"[^A-Za-z0-9_-]+" if underscores else r"[^A-Za-z0-9-]+"
    base = re.sub(allowed, "-", app_name)
    base = re.sub(r"-{2,}", "-", base).strip("-_")
    base = base[: max_len - 9].rstrip("-_") or "app"
    return f"{base}-{random_suffix()}"


def tag_value(value: str) -> str:
    """``value`` made a valid AWS tag value (allowed characters, at most 256 long).

    >>> tag_value("train (v2)")
    'train _v2_'
    """
    return _TAG_CHARS.sub("_", value)[:256]


def app_tags(scheduler: str, app: AppDef, session_name: str) -> dict[str, str]:
    """The tags that identify an app launched by anylaunch, with the job's metadata
    (:func:`~anylaunch.schedulers.common.job_metadata.job_metadata`) as valid tag values.

    >>> from anylaunch.specs import AppDef, Role
    >>> tags = app_tags("aws_batch", AppDef("t", [Role("r", "img")]), "s")
    >>> [tags[k] for k in ("anylaunch/app-name", "anylaunch/scheduler", "anylaunch/session")]
    ['t', 'aws_batch', 's']
    """
    tags = {
        APP_NAME_TAG: tag_value(app.name),
        SESSION_TAG: tag_value(session_name),
    }
    # the job's metadata (scheduler, version, context), as valid tag values
    tags.update({k: tag_value(v) for k, v in plain_values(job_metadata(app, scheduler)).items()})
    return tags


def double_quote(word: str) -> str:
    """Quotes ``word`` for a POSIX shell inside double quotes (so ``${VAR}`` added around
    it after quoting still expands, while everything in ``word`` stays literal).

    >>> double_quote('say "hi" to $USER')
    '"say \\\\"hi\\\\" to \\\\$USER"'
    """
    escaped = re.sub(r'([\\"$`])', r"\\\1", word)
    return f'"{escaped}"'


def to_millis(when: datetime) -> int:
    """Milliseconds since the epoch (naive datetimes are local time).

    >>> from datetime import timezone
    >>> to_millis(datetime(1970, 1, 1, 0, 0, 1, tzinfo=timezone.utc))
    1000
    """
    return int(when.timestamp() * 1000)


# ---------------------------------------------------------------------------------------------
# Images
# ---------------------------------------------------------------------------------------------


def plan_image_pushes(app: AppDef, image_repo: str | None) -> dict[str, tuple[str, str]]:
    """Maps each role image that exists only locally (``sha256:<id>``) to ``(repo, tag)``.

    AWS pulls images from a registry, so such an image is pushed to ``{image_repo}:{id}``
    when the app is scheduled (see :func:`push_images`); other images are used as they are.

    >>> from anylaunch.specs import AppDef, Role
    >>> app = AppDef("a", [Role("r", "sha256:" + "ab" * 32), Role("s", "busybox")])
    >>> plan_image_pushes(app, "registry.example.com/ml")["sha256:" + "ab" * 32][1][:6]
    'ababab'

    Raises:
        InvalidRunConfigException: a role uses a local image and ``image_repo`` is not set.
    """
    pushes: dict[str, tuple[str, str]] = {}
    for role in app.roles:
        if not role.image.startswith("sha256:"):
            continue
        if not image_repo:
            raise InvalidRunConfigException(
                "image_repo",
                image_repo,
                f"role {role.name!r} uses the local image {role.image[:19]}..., which AWS "
                "cannot pull",
                "set image_repo to a repository you can push to (e.g. "
                "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainer)",
            )
        repo = image_repo.rstrip("/")
        if re.search(r":[^/]*$", repo):
            raise InvalidRunConfigException(
                "image_repo",
                image_repo,
                "must be a repository without a tag (the image id becomes the tag)",
                "drop the ':tag' suffix",
            )
        pushes[role.image] = (repo, role.image[len("sha256:") :])
    return pushes


def push_images(images: Mapping[str, tuple[str, str]], scheduler: str) -> None:
    """Tags each local image as ``repo:tag`` and pushes it (Docker engine from the environment).

    Raises:
        MissingDependencyError: the docker SDK is not installed.
        AnylaunchError: the engine could not tag or push an image.
    """
    if not images:
        return
    docker = require_sdk("docker", extra="docker", scheduler=scheduler)
    client = docker.from_env()
    try:
        for image_id, (repo, tag) in images.items():
            client.images.get(image_id).tag(repo, tag=tag)
            for line in client.api.push(repo, tag=tag, stream=True, decode=True):
                if "error" in line:
                    raise AnylaunchError(
                        f"pushing {repo}:{tag} failed: {line['error']}. Fix: check that "
                        "image_repo exists and that `docker login` gave this engine push access"
                    )
            log.info("pushed %s as %s:%s", image_id, repo, tag)
    finally:
        client.close()


# ---------------------------------------------------------------------------------------------
# Requests against the service model
# ---------------------------------------------------------------------------------------------


def check_request(service: str, operation: str, params: Mapping[str, Any]) -> None:
    """Checks ``params`` of ``service.operation`` against botocore's service model.

    On top of botocore's own client-side validation (required members, types, minimums) this
    checks maximum lengths and values, enums and patterns, so that a request AWS would reject
    fails at dryrun with the offending field. Needs no network and no credentials; a no-op
    when botocore is not installed.

    >>> check_request("sagemaker", "StopTrainingJob", {"TrainingJobName": "a_b"})
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: StopTrainingJob.TrainingJobName='a_b' is invalid: does not match the pattern [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}. Fix: change the value so that AWS accepts it
    """
    try:
        from botocore.exceptions import ParamValidationError
        from botocore.session import get_session
        from botocore.validate import validate_parameters
    except ImportError:
        return
    model = _service_model(get_session, service).operation_model(operation)
    try:
        validate_parameters(dict(params), model.input_shape)
    except ParamValidationError as e:
        raise InvalidSpecError(
            operation, "<request>", str(e).replace("\n", " "), "fix the fields named"
        ) from None
    _check_shape(operation, params, model.input_shape)


_MODELS: dict[str, Any] = {}


def _service_model(get_session: Callable[[], Any], service: str) -> Any:
    if service not in _MODELS:
        _MODELS[service] = get_session().get_service_model(service)
    return _MODELS[service]


def _check_shape(path: str, value: Any, shape: Any) -> None:
    meta = shape.metadata
    kind = shape.type_name

    def fail(problem: str) -> None:
        shown = value if not isinstance(value, (dict, list)) or len(str(value)) < 80 else "..."
        raise InvalidSpecError(path, shown, problem, "change the value so that AWS accepts it")

    if kind == "structure" and isinstance(value, Mapping):
        for name, member in shape.members.items():
            if name in value:
                _check_shape(f"{path}.{name}", value[name], member)
    elif kind == "list" and isinstance(value, list):
        if "max" in meta and len(value) > meta["max"]:
            fail(f"has {len(value)} items; AWS allows at most {meta['max']}")
        for i, item in enumerate(value):
            _check_shape(f"{path}[{i}]", item, shape.member)
    elif kind == "map" and isinstance(value, Mapping):
        if "max" in meta and len(value) > meta["max"]:
            fail(f"has {len(value)} entries; AWS allows at most {meta['max']}")
        for key, item in value.items():
            _check_shape(f"{path} key", key, shape.key)
            _check_shape(f"{path}[{key!r}]", item, shape.value)
    elif kind == "string" and isinstance(value, str):
        if "max" in meta and len(value) > meta["max"]:
            fail(f"is {len(value)} characters long; AWS allows at most {meta['max']}")
        if shape.enum and value not in shape.enum:
            from anylaunch.specs.errors import did_you_mean

            fail(f"is not one of the values AWS accepts.{did_you_mean(value, shape.enum)}")
        pattern = meta.get("pattern")
        if pattern and not _fullmatch(pattern, value):
            fail(f"does not match the pattern {pattern}")
    elif kind in ("integer", "long") and isinstance(value, int) and value > meta.get("max", value):
        fail(f"is more than {meta['max']}, the most AWS allows")


def _fullmatch(pattern: str, value: str) -> bool:
    try:
        return re.fullmatch(pattern, value, flags=re.DOTALL) is not None
    except re.error:  # a Java-only construct: leave this check to AWS
        return True


# ---------------------------------------------------------------------------------------------
# CloudWatch Logs
# ---------------------------------------------------------------------------------------------

#: Where a log stream lives: ``(log group, log stream)``.
StreamLocation = tuple[str, str]


def follow_log_stream(
    logs_client: Any,
    locate: Callable[[], StreamLocation | None],
    is_done: Callable[[], bool],
    since: datetime | None = None,
    until: datetime | None = None,
    should_tail: bool = False,
    poll_interval: float = 0.5,
    max_poll_interval: float = 5.0,
    settle_s: float = 2.0,
) -> Iterator[str]:
    """Yields the lines (each ending in a newline) of one CloudWatch log stream, oldest first.

    ``locate`` returns where the stream is, or None while it does not exist yet (the job has
    not started). ``since``/``until`` keep the events in that window. With ``should_tail``
    it keeps polling (backing off from ``poll_interval`` to ``max_poll_interval``) until
    ``is_done()`` and then until nothing new arrived for ``settle_s`` seconds (CloudWatch
    ingests a job's last lines shortly after it ended); without it, it returns what is there
    now.
    """
    where: StreamLocation | None = None
    token: str | None = None
    delay = poll_interval
    done_at: float | None = None
    while True:
        if should_tail and done_at is None and is_done():
            done_at = time.monotonic()
        if where is None:
            where = locate()
        got_events = False
        if where is not None:
            for events, next_token in _read_pages(logs_client, where, token, since, until):
                token = next_token
                for event in events:
                    got_events = True
                    message = str(event.get("message", ""))
                    yield from split_lines(message if message.endswith("\n") else message + "\n")
        if not should_tail:
            return
        if got_events:
            delay = poll_interval
            continue
        if done_at is not None and time.monotonic() - done_at >= settle_s:
            return
        if until is not None and time.time() > until.timestamp() + 5:
            return  # nothing written from now on can fall in the window
        time.sleep(delay if done_at is None else min(delay, settle_s))
        delay = min(delay * 2, max_poll_interval)


def _read_pages(
    logs_client: Any,
    where: StreamLocation,
    token: str | None,
    since: datetime | None,
    until: datetime | None,
) -> Iterator[tuple[list[dict[str, Any]], str | None]]:
    """Pages of events after ``token``, each with the token to resume from."""
    group, stream = where
    # startFromHead must stay true when resuming from a forward token
    kwargs: dict[str, Any] = {"logGroupName": group, "logStreamName": stream, "startFromHead": True}
    if since is not None:
        kwargs["startTime"] = to_millis(since)
    if until is not None:
        kwargs["endTime"] = to_millis(until)
    while True:
        try:
            response = logs_client.get_log_events(
                **kwargs, **({"nextToken": token} if token else {})
            )
        except Exception as e:
            if is_client_error(e, "ResourceNotFoundException"):
                return  # the stream is not there (yet, or any more)
            raise
        events = response.get("events", [])
        next_token = response.get("nextForwardToken") or token
        yield events, next_token
        # the end of the stream: no events, or the same token back
        if not events or next_token == token:
            return
        token = next_token


def masked_request(value: Any) -> Any:
    """A copy of an AWS request with the values of secret-looking environment variables masked:
    Batch's ``[{"name": ..., "value": ...}]`` lists and SageMaker's ``Environment`` mapping.

    >>> masked_request({"environment": [{"name": "API_TOKEN", "value": "s3"}],
    ...                 "Environment": {"DB_PASSWORD": "x", "LR": "0.1"}})
    {'environment': [{'name': 'API_TOKEN', 'value': '***'}], 'Environment': {'DB_PASSWORD': '***', 'LR': '0.1'}}
    """
    from anylaunch.specs.secrets import is_secret_env_name

    if isinstance(value, list):
        return [masked_request(v) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"name", "value"} and is_secret_env_name(str(value["name"])):
        return {"name": value["name"], "value": "***"}
    masked = {}
    for key, sub in value.items():
        if key == "Environment" and isinstance(sub, dict):
            masked[key] = {k: "***" if is_secret_env_name(str(k)) else v for k, v in sub.items()}
        else:
            masked[key] = masked_request(sub)
    return masked


def masked_repr(request: Any) -> str:
    """The dataclass repr of a native AWS request, secret env values masked (a request's repr
    ends up in logs and errors; the request itself keeps the real values)."""
    from dataclasses import fields

    shown = ", ".join(
        f"{f.name}={masked_request(getattr(request, f.name))!r}" for f in fields(request)
    )
    return f"{type(request).__name__}({shown})"
