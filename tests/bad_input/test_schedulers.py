"""Every scheduler's dryrun: run options (misspelt, wrong type, out of range, non-finite) and
what its backend would reject later, refused before anything is submitted."""

from __future__ import annotations

import math
from typing import Any

import pytest

from anylaunch.runner import get_runner
from anylaunch.specs import AppDef, Resource, Role
from tests.bad_input.conftest import SECRET, Case, assert_rejected

SCHEDULERS = (
    "local_cwd",
    "local_docker",
    "kubernetes",
    "kubernetes_mcad",
    "aws_batch",
    "aws_sagemaker",
    "slurm",
    "lsf",
)
#: Run options each scheduler needs to dry-run at all.
REQUIRED: dict[str, dict[str, Any]] = {
    "aws_batch": {"queue": "q"},
    "aws_sagemaker": {
        "role_arn": "arn:aws:iam::123456789012:role/sm",
        "output_path": "s3://bucket/out/",
        "instance_type": "ml.m5.xlarge",
    },
}


def _app(image: str = "busybox:1.36", **role: Any) -> AppDef:
    role.setdefault("resource", Resource(cpu=1, gpu=0, memMB=256))
    return AppDef("bad", [Role("w", image, entrypoint="echo", **role)])


def _dryrun(scheduler: str, cfg: Any = None, app: AppDef | None = None) -> Any:
    cfg = {} if cfg is None else cfg
    with get_runner() as runner:
        merged = {**REQUIRED.get(scheduler, {}), **cfg} if isinstance(cfg, dict) else cfg
        return runner.dryrun(app or _app(), scheduler, cfg=merged)


CASES: list[Case] = []
for name in SCHEDULERS:
    CASES += [
        Case(
            f"{name}-misspelt-option", lambda s=name: _dryrun(s, {"nmaespace": SECRET}), "nmaespace"
        ),
        Case(f"{name}-option-int-key", lambda s=name: _dryrun(s, {1: "x"}), "cfg"),
        Case(f"{name}-cfg-not-a-dict", lambda s=name: _dryrun(s, ["a=b"]), "cfg"),  # type: ignore[arg-type]
        Case(
            f"{name}-env-nul-secret",
            lambda s=name: _dryrun(s, app=_app(env={"API_TOKEN": SECRET + "\x00"})),
            "env",
        ),
        Case(f"{name}-args-nul", lambda s=name: _dryrun(s, app=_app(args=["a\x00"])), "args"),
    ]

for name, option in (("local_cwd", "cancel_grace_s"), ("local_docker", "cancel_grace_s")):
    for label, value in (("inf", math.inf), ("nan", math.nan), ("negative", -1.0), ("str", "soon")):
        CASES.append(
            Case(
                f"{name}-{option}-{label}",
                lambda s=name, o=option, v=value: _dryrun(s, {o: v}),
                option,
            )
        )

for name in ("local_cwd", "local_docker"):
    for option in ("prepend_cwd", "privileged", "init", "auto_set_cuda_visible_devices"):
        if option in ("privileged", "init") and name == "local_cwd":
            continue
        if option in ("prepend_cwd", "auto_set_cuda_visible_devices") and name == "local_docker":
            continue
        CASES.append(
            Case(
                f"{name}-{option}-maybe", lambda s=name, o=option: _dryrun(s, {o: "maybe"}), option
            )
        )

for name in ("kubernetes", "kubernetes_mcad"):
    CASES += [
        Case(
            f"{name}-namespace-upper",
            lambda s=name: _dryrun(s, {"namespace": "Bad_NS"}),
            "namespace",
        ),
        Case(f"{name}-namespace-empty", lambda s=name: _dryrun(s, {"namespace": ""}), "namespace"),
        Case(
            f"{name}-service_account-space",
            lambda s=name: _dryrun(s, {"service_account": "Bad Account"}),
            "service_account",
        ),
        Case(
            f"{name}-priority_class-upper",
            lambda s=name: _dryrun(s, {"priority_class": "UPPER_case"}),
            "priority_class",
        ),
        Case(
            f"{name}-image_pull_policy",
            lambda s=name: _dryrun(s, {"image_pull_policy": "Sometimes"}),
            "image_pull_policy",
        ),
        Case(
            f"{name}-reserved_millicpu-negative",
            lambda s=name: _dryrun(s, {"reserved_millicpu": -1}),
            "reserved_millicpu",
        ),
        Case(
            f"{name}-reserved_memmb-str",
            lambda s=name: _dryrun(s, {"reserved_memmb": "lots"}),
            "reserved_memmb",
        ),
        Case(f"{name}-image-empty", lambda s=name: _dryrun(s, app=_app(image="")), "image"),
        Case(f"{name}-image-dot", lambda s=name: _dryrun(s, app=_app(image=".")), "image"),
        Case(f"{name}-image-path", lambda s=name: _dryrun(s, app=_app(image="/tmp")), "image"),
        Case(
            f"{name}-image-spaces", lambda s=name: _dryrun(s, app=_app(image="my image")), "image"
        ),
    ]
CASES += [
    Case("kubernetes-mode", lambda: _dryrun("kubernetes", {"mode": "pods"}), "mode"),
    Case(
        "kubernetes-queue-without-volcano", lambda: _dryrun("kubernetes", {"queue": "q"}), "queue"
    ),
    Case(
        "kubernetes_mcad-priority-str",
        lambda: _dryrun("kubernetes_mcad", {"priority": "high"}),
        "priority",
    ),
    Case("local_docker-image-empty", lambda: _dryrun("local_docker", app=_app(image="")), "image"),
    Case("local_docker-image-dot", lambda: _dryrun("local_docker", app=_app(image=".")), "image"),
    Case("local_docker-copy_env-str", lambda: _dryrun("local_docker", {"copy_env": 5}), "copy_env"),
    Case("local_docker-env-list", lambda: _dryrun("local_docker", {"env": 5}), "env"),
    Case("aws_batch-queue-missing", lambda: _dryrun("aws_batch", {"queue": None}), "queue"),
    Case("aws_batch-image-dot", lambda: _dryrun("aws_batch", app=_app(image=".")), "image"),
    Case("aws_batch-image-empty", lambda: _dryrun("aws_batch", app=_app(image="")), "image"),
    Case("aws_batch-priority-str", lambda: _dryrun("aws_batch", {"priority": "top"}), "priority"),
    Case(
        "aws_batch-startup_timeout-str",
        lambda: _dryrun("aws_batch", {"startup_timeout": "1h"}),
        "startup_timeout",
    ),
    Case(
        "aws_batch-privileged-maybe",
        lambda: _dryrun("aws_batch", {"privileged": "maybe"}),
        "privileged",
    ),
    Case(
        "aws_sagemaker-role_arn-missing",
        lambda: _dryrun("aws_sagemaker", {"role_arn": None}),
        "role_arn",
    ),
    Case(
        "aws_sagemaker-output_path-missing",
        lambda: _dryrun("aws_sagemaker", {"output_path": None}),
        "output_path",
    ),
    Case(
        "aws_sagemaker-max_wait-without-spot",
        lambda: _dryrun("aws_sagemaker", {"max_wait": 10}),
        "max_wait",
    ),
    Case(
        "aws_sagemaker-subnets-without-groups",
        lambda: _dryrun("aws_sagemaker", {"subnets": ["s-1"]}),
        "security_group_ids",
    ),
    Case(
        "aws_sagemaker-volume_size-str",
        lambda: _dryrun("aws_sagemaker", {"volume_size": "big"}),
        "volume_size",
    ),
    Case(
        "aws_sagemaker-too-many-retries",
        lambda: _dryrun("aws_sagemaker", app=_app(max_retries=31)),
        "max_retries",
    ),
    Case(
        "aws_sagemaker-no-instance-type",
        lambda: _dryrun("aws_sagemaker", {"instance_type": None}),
        "instance_type",
    ),
    Case(
        "slurm-no-resources",
        lambda: _dryrun("slurm", app=_app(resource=Resource(-1, -1, -1))),
        "resource",
    ),
    Case("slurm-exclusive-maybe", lambda: _dryrun("slurm", {"exclusive": "maybe"}), "exclusive"),
    Case("slurm-sbatch_args-int", lambda: _dryrun("slurm", {"sbatch_args": 5}), "sbatch_args"),
    Case(
        "slurm-partition-newline",
        lambda: _dryrun("slurm", {"partition": "debug\n#SBATCH --x"}),
        "partition",
    ),
    Case("slurm-job_dir-nul", lambda: _dryrun("slurm", {"job_dir": "/tmp/\x00"}), "job_dir"),
    Case(
        "lsf-host_network-maybe", lambda: _dryrun("lsf", {"host_network": "maybe"}), "host_network"
    ),
    Case(
        "lsf-lsf_queue-newline", lambda: _dryrun("lsf", {"lsf_queue": "q\n#BSUB -x"}), "lsf_queue"
    ),
    Case("lsf-jobdir-nul", lambda: _dryrun("lsf", {"jobdir": "/tmp/\x00"}), "jobdir"),
    # issue 31: what the backend would reject later, refused at dryrun
    Case(
        "slurm-partition-space", lambda: _dryrun("slurm", {"partition": "debug gpu"}), "partition"
    ),
    Case(
        "slurm-partition-empty-item", lambda: _dryrun("slurm", {"partition": "a,,b"}), "partition"
    ),
    Case("slurm-account-space", lambda: _dryrun("slurm", {"account": "my lab"}), "account"),
    Case("slurm-qos-tab", lambda: _dryrun("slurm", {"qos": "hi\tlo"}), "qos"),
    Case("lsf-jobdir-relative", lambda: _dryrun("lsf", {"jobdir": "jobs/run1"}), "jobdir"),
    Case("lsf-jobdir-dot", lambda: _dryrun("lsf", {"jobdir": "."}), "jobdir"),
    Case(
        "kubernetes_mcad-coscheduler_name-upper",
        lambda: _dryrun("kubernetes_mcad", {"coscheduler_name": "Scheduler Plugins"}),
        "coscheduler_name",
    ),
    Case(
        "local_docker-copy_env-empty-item",
        lambda: _dryrun("local_docker", {"copy_env": ["AWS_*", ""]}),
        "copy_env",
    ),
    Case(
        "local_docker-copy_env-from-str",
        lambda: _dryrun("local_docker", {"copy_env": "AWS_*,,HF_TOKEN"}),
        "copy_env",
    ),
    Case(
        "local_docker-memory-below-engine-minimum",
        lambda: _dryrun("local_docker", app=_app(resource=Resource(1, 0, 5))),
        "memMB",
    ),
    Case(
        "aws_sagemaker-role_arn-not-an-arn",
        lambda: _dryrun("aws_sagemaker", {"role_arn": "my-sagemaker-role"}),
        "role_arn",
    ),
    Case(
        "aws_sagemaker-role_arn-short-account",
        lambda: _dryrun("aws_sagemaker", {"role_arn": "arn:aws:iam::1234:role/sm"}),
        "role_arn",
    ),
    Case(
        "aws_sagemaker-role_arn-user-not-role",
        lambda: _dryrun("aws_sagemaker", {"role_arn": "arn:aws:iam::123456789012:user/me"}),
        "role_arn",
    ),
    Case(
        "aws_sagemaker-max_run-over-28-days",
        lambda: _dryrun("aws_sagemaker", {"max_run": 29 * 86400}),
        "max_run",
    ),
    Case(
        "aws_batch-job_role_arn-malformed",
        lambda: _dryrun("aws_batch", {"job_role_arn": "arn:aws:iam:us-east-1:123456789012:role/x"}),
        "job_role_arn",
    ),
    Case(
        "aws_batch-execution_role_arn-malformed",
        lambda: _dryrun("aws_batch", {"execution_role_arn": "ecsTaskExecutionRole"}),
        "execution_role_arn",
    ),
    Case(
        "aws_batch-queue-arn-malformed",
        lambda: _dryrun("aws_batch", {"queue": "arn:aws:batch:us-east-1:123:job-queue/q"}),
        "queue",
    ),
    Case("aws_batch-queue-space", lambda: _dryrun("aws_batch", {"queue": "my queue"}), "queue"),
    Case("unknown-scheduler", lambda: _dryrun("local_cwdd"), "local_cwdd"),
    Case("scheduler-int", lambda: _dryrun(3), "scheduler"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("call", "field"), [c.param() for c in CASES])
def test_rejected(call: Any, field: str) -> None:
    assert_rejected(call, field)


def test_option_values_that_can_work_still_pass() -> None:
    """The forms the backends accept: several Slurm partitions, ~ job dirs, real ARNs."""
    _dryrun("slurm", {"partition": "debug,gpu", "account": "lab-1", "qos": "normal"})
    _dryrun("lsf", {"jobdir": "~/.anylaunch/lsf"})
    arn = "arn:aws:iam::123456789012:role/service-role/AmazonSageMaker-ExecutionRole"
    _dryrun("aws_sagemaker", {"role_arn": arn, "max_run": 28 * 86400})
    queue = "arn:aws-us-gov:batch:us-gov-west-1:123456789012:job-queue/gpu_q"
    _dryrun("aws_batch", {"queue": queue, "execution_role_arn": arn})
    _dryrun("kubernetes_mcad", {"coscheduler_name": "scheduler-plugins-scheduler"})
    _dryrun(
        "local_docker", {"copy_env": ["AWS_*", "HF_TOKEN"]}, app=_app(resource=Resource(1, 0, 6))
    )
