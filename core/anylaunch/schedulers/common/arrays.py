"""What every scheduler shares to run an app as a job array.

- :func:`index_script`: the POSIX shell one submission runs for every index, for backends
  whose array tasks learn their index from an env var (Slurm, LSF, AWS Batch, a Kubernetes
  Indexed Job): it sets ``ANYLAUNCH_ARRAY_INDEX`` (and a sweep's ``ANYLAUNCH_PARAM_*``) and
  runs the role's command with the array macros expanded by the shell.
- :func:`array_meta` / :func:`read_array_meta`: the few facts (size, success ratio, selected
  indices) a backend stores beside the job so that any process can describe it.
- :func:`array_response`: the describe response of an array from its indices' facts, by the
  one array rule (:meth:`~anylaunch.specs.ArrayStatus.app_state`), with one replica per index
  (replica id = index: logs and statuses address an index as ``role/index``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from anylaunch.specs.api import AppState, ReplicaStatus, Role, RoleStatus
from anylaunch.specs.array_status import ArrayStatus, index_ranges, parse_index_ranges
from anylaunch.specs.arrays import ARRAY_INDEX_ENV, ARRAY_SIZE_ENV, ArraySpec, shell_role
from anylaunch.specs.errors import InvalidSpecError
from anylaunch.specs.markers import NONE

__all__ = [
    "ArrayDescription",
    "ArrayMeta",
    "IndexFacts",
    "array_meta",
    "array_response",
    "index_prelude",
    "index_script",
    "read_array_meta",
    "select_by_position",
    "shell_word",
]

_REF = re.compile(r"\$\{(ANYLAUNCH_[A-Z0-9_]+)\}")


def shell_word(text: str) -> str:
    """One shell word for ``text``: literal except the ``${ANYLAUNCH_*}`` references the
    array macros became (:func:`~anylaunch.specs.arrays.substitute_shell_refs`).

    >>> print(shell_word("--lr=${ANYLAUNCH_PARAM_LR}"), shell_word("$HOME ${ANYLAUNCH_ARRAY_INDEX}"))
    --lr="${ANYLAUNCH_PARAM_LR}" '$HOME '"${ANYLAUNCH_ARRAY_INDEX}"
    """
    parts: list[str] = []
    last = 0
    for match in _REF.finditer(text):
        if match.start() > last:
            parts.append(shlex.quote(text[last : match.start()]))
        parts.append(f'"${{{match.group(1)}}}"')
        last = match.end()
    if last < len(text) or not parts:
        parts.append(shlex.quote(text[last:]))
    return "".join(parts)


def select_by_position(selected_expr: str) -> str:
    """Shell lines that turn ``$anylaunch_slot`` (the task's 0-based position in a
    submission) into the array index at that position of the space-separated list
    ``selected_expr`` expands to, unless it is ``all`` (the position is then the index): for
    backends whose one definition serves the whole array and a retry's subset alike, the
    subset passed at submission (a job parameter, an env var).

    >>> import subprocess
    >>> script = "anylaunch_slot=$2; " + select_by_position('$1') + 'echo "$anylaunch_slot"'
    >>> [subprocess.run(["sh", "-c", script, "sh", sel, pos], capture_output=True,
    ...                 text=True).stdout.strip() for sel, pos in [("all", "5"), ("3 17", "1")]]
    ['5', '17']
    """
    return (
        f'if [ "{selected_expr}" != all ]; then\n'
        f"  set -f; set -- {selected_expr}\n"
        '  if [ "$anylaunch_slot" -ge "$#" ]; then\n'
        '    echo "anylaunch: no index at array position $anylaunch_slot" >&2; exit 97\n'
        "  fi\n"
        '  shift "$anylaunch_slot"; anylaunch_slot=$1\n'
        "fi\n"
    )


def index_prelude(array: ArraySpec, position_expr: str) -> list[str]:
    """Shell lines that set the array's env for the task at ``position_expr`` (a shell
    expression of the backend's 0-based task position, e.g. ``$AWS_BATCH_JOB_ARRAY_INDEX``).

    When the submission runs a subset of the indices (a retry) the position maps to the
    index through a ``case``; otherwise the position is the index.
    """
    picked = array.selected
    lines = [f"anylaunch_position={position_expr}"]
    if picked == tuple(range(len(picked))):
        lines.append(f"{ARRAY_INDEX_ENV}=$anylaunch_position")
    else:
        lines.append('case "$anylaunch_position" in')
        lines += [f"  {pos}) {ARRAY_INDEX_ENV}={index} ;;" for pos, index in enumerate(picked)]
        lines += [
            '  *) echo "anylaunch: no index at array position $anylaunch_position" >&2; exit 97 ;;',
            "esac",
        ]
    lines.append(f"export {ARRAY_INDEX_ENV} {ARRAY_SIZE_ENV}={array.size}")
    if array.params:
        lines.append(f'case "${ARRAY_INDEX_ENV}" in')
        for index in picked:
            exports = " ".join(
                f"ANYLAUNCH_PARAM_{name.upper()}={shlex.quote(value)}"
                for name, value in array.params[index].items()
            )
            lines.append(f"  {index}) export {exports} ;;")
        lines.append("esac")
    return lines


def index_script(
    role: Role, array: ArraySpec, position_expr: str, *, env: bool = True, run: str = "exec"
) -> str:
    """The shell script every task of the array runs: :func:`index_prelude`, the role's env
    whose values use array macros (``env=True``; the backend sets the others itself), then
    the role's command (``run`` is its prefix: ``exec``, or e.g. ``srun``).

    >>> role = Role("r", image=".", entrypoint="echo", args=["shard", "${array_index}"])
    >>> print(index_script(role, ArraySpec(4), "$SLURM_ARRAY_TASK_ID"))
    anylaunch_position=$SLURM_ARRAY_TASK_ID
    ANYLAUNCH_ARRAY_INDEX=$anylaunch_position
    export ANYLAUNCH_ARRAY_INDEX ANYLAUNCH_ARRAY_SIZE=4
    exec echo shard "${ANYLAUNCH_ARRAY_INDEX}"
    """
    shelled = shell_role(role)
    lines = index_prelude(array, position_expr)
    if env:
        for name, value in shelled.env.items():
            if value != role.env.get(name) or _REF.search(value):
                lines.append(f"export {name}={shell_word(value)}")
    words = [shell_word(word) for word in (shelled.entrypoint, *shelled.args)]
    lines.append(" ".join([run, *words] if run else words))
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class ArrayMeta:
    """The facts about an array that describe needs, stored beside the job."""

    size: int
    min_success_ratio: float = 1.0
    selected: tuple[int, ...] | None = None

    def status(
        self, states: Mapping[int, AppState], exit_codes: Mapping[int, int] | None = None
    ) -> ArrayStatus:
        """The array's status from its indices' states (missing ones are PENDING)."""
        return ArrayStatus(
            self.size,
            dict(states),
            dict(exit_codes or {}),
            self.min_success_ratio,
            self.selected,
        )


def array_meta(array: ArraySpec) -> str:
    """The compact text a backend stores beside an array job (a label, tag or comment).

    >>> array_meta(ArraySpec(20, min_success_ratio=0.9, indices=[3, 4, 5]))
    'size=20;ratio=0.9;selected=3-5'
    >>> read_array_meta('size=20;ratio=0.9;selected=3-5')
    ArrayMeta(size=20, min_success_ratio=0.9, selected=(3, 4, 5))
    """
    text = f"size={array.size};ratio={array.min_success_ratio!r}"
    if array.indices is not None:
        text += f";selected={index_ranges(array.indices)}"
    return text


def read_array_meta(text: str) -> ArrayMeta:
    """Inverse of :func:`array_meta`."""
    fields = dict(part.partition("=")[::2] for part in text.split(";") if part)
    try:
        size = int(fields["size"])
        ratio = float(fields.get("ratio", "1.0"))
    except (KeyError, ValueError):
        raise InvalidSpecError(
            "array metadata",
            text,
            "is not what array_meta() writes",
            "describe arrays submitted by anylaunch",
        ) from None
    selected = fields.get("selected")
    return ArrayMeta(
        size, ratio, tuple(parse_index_ranges(selected)) if selected is not None else None
    )


@dataclass
class IndexFacts:
    """What a backend knows about one index of an array."""

    state: AppState
    exit_code: int | None = None
    hostname: str = ""
    structured_error_msg: str = NONE


@dataclass
class ArrayDescription:
    """An array's status pieces for a :class:`DescribeAppResponse`."""

    state: AppState
    msg: str
    roles_statuses: list[RoleStatus] = field(default_factory=list)
    array: ArrayStatus | None = None


def array_response(
    meta: ArrayMeta, role_name: str, facts: Mapping[int, IndexFacts]
) -> ArrayDescription:
    """State, message, per-index replicas and :class:`ArrayStatus` of an array app.

    >>> meta = ArrayMeta(3)
    >>> facts = {0: IndexFacts(AppState.SUCCEEDED, 0), 1: IndexFacts(AppState.FAILED, 2)}
    >>> found = array_response(meta, "w", facts)
    >>> found.state.name, found.msg
    ('RUNNING', 'array: 1/3 succeeded, 1 failed, 1 pending')
    >>> [(r.id, r.state.name) for r in found.roles_statuses[0].replicas]
    [(0, 'SUCCEEDED'), (1, 'FAILED'), (2, 'PENDING')]
    """
    status = meta.status(
        {i: f.state for i, f in facts.items()},
        # a succeeded index's 0 says nothing: leaving it out keeps a large status small
        {
            i: f.exit_code
            for i, f in facts.items()
            if f.exit_code is not None and not (f.exit_code == 0 and f.state == AppState.SUCCEEDED)
        },
    )
    replicas: list[ReplicaStatus] = []
    for index in status.indices():
        fact = facts.get(index)
        replicas.append(
            ReplicaStatus(
                index,
                status.state_of(index),
                role_name,
                fact.hostname if fact is not None else "",
                fact.structured_error_msg if fact is not None else NONE,
            )
        )
    return ArrayDescription(
        state=status.app_state(),
        msg=status.summary(),
        roles_statuses=[RoleStatus(role_name, replicas)],
        array=status,
    )
