"""Generated hostile strings through every scheduler (issue 15).

Property: a value used as an argument, an env value, an app or role name, or a path either is
rejected at dryrun with the project's error, or reaches the app byte for byte; a rejected one
leaves nothing on the backend. Hypothesis draws from building blocks that break shells, job
scripts and API servers (quotes, ``$(...)``, ``${X}``, backticks, ``;``, newlines, tabs, NUL,
leading dashes, unicode, 100 KiB values, empty strings).

``$$`` (and ``$`` before a macro name) is excluded from the values compared byte for byte: it
is the macro syntax (``$$`` is a literal ``$``), as in TorchX.
"""

from __future__ import annotations

import hashlib
import re
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from anylaunch.specs import AppDef, AppState, Role
from anylaunch.specs.errors import AnylaunchError
from tests.schedulers.contract.kits import ROLE, SCHEDULERS, Kit
from tests.schedulers.contract.test_contract import FAILING_KITS, TERMINAL, _watch

BLOCKS = [
    "'",
    '"',
    "$(id)",
    "${HOME}",
    "$X",
    "`id`",
    ";",
    "&&",
    "|",
    ">",
    "\n",
    "\t",
    "\x00",
    "-",
    "--flag",
    "ünï",
    "✓",
    "日本",
    " ",
    "\\",
    "*",
    "#",
    "EOF",
    "ANYLAUNCH_EOF",
    "%s",
    "{}",
]
hostile = st.one_of(
    st.lists(st.sampled_from(BLOCKS), max_size=8).map("".join),
    st.text(max_size=30),
    st.just(""),
    st.just("x" * 102_400),
)
_MACRO = re.compile(r"\$(\$|\{?(img_root|app_id|replica_id|rank0_env|base_img_root)\b)")


def _is_plain(value: str) -> bool:
    """No macro syntax: the value must arrive exactly as given."""
    return not _MACRO.search(value)


def _try_dryrun(kit: Kit, app: AppDef) -> Any:
    """The dryrun's request, or None if the project's error rejected the app."""
    try:
        return kit.scheduler.submit_dryrun(app, kit.cfg)
    except AnylaunchError:
        return None


@pytest.mark.parametrize("kit", SCHEDULERS, indirect=True)
def test_hostile_values_are_accepted_or_rejected_cleanly_at_dryrun(kit: Kit) -> None:
    @settings(
        max_examples=60,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        value=hostile, where=st.sampled_from(["arg", "env", "app_name", "role_name", "entrypoint"])
    )
    def check(value: str, where: str) -> None:
        app = kit.app("true")
        role = app.roles[0]
        try:  # the specs themselves may refuse it (with the project's error)
            if where == "arg":
                role.args = [*role.args, value]
            elif where == "env":
                role.env["HOSTILE"] = value
            elif where == "app_name":
                app = AppDef(value, app.roles)
            elif where == "role_name":
                app = AppDef(
                    app.name,
                    [
                        Role(
                            value,
                            role.image,
                            entrypoint=role.entrypoint,
                            args=role.args,
                            resource=role.resource,
                        )
                    ],
                )
            else:
                role.entrypoint = value
        except AnylaunchError:
            return
        _try_dryrun(kit, app)  # anything but the project's error fails the test

    check()


@pytest.mark.parametrize("kit", FAILING_KITS, indirect=True)
def test_hostile_values_reach_the_app_byte_for_byte(kit: Kit) -> None:
    """One app per backend carries a generated batch: each value as an argument and as an env
    value; the app prints the SHA-256 of each."""
    drawn: list[list[str]] = []

    @settings(
        max_examples=1,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(values=st.lists(hostile, min_size=12, max_size=12))
    def draw(values: list[str]) -> None:
        assume(all(_is_plain(v) for v in values))
        drawn.append(values)

    draw()
    values = [*drawn[-1], "x" * 102_400, "", "-n", "a\tb\nc", "$(id) `id` ${HOME} 'q' \"dq\""]
    carried = [v for v in values if "\x00" not in v]
    # a digest per value: byte-exact, and a short line (log drivers split long lines, e.g.
    # Docker's awslogs at 16 KiB)
    digest = 'printf "%s" "$1" | sha256sum | cut -d" " -f1'
    script = f'for a in "$@"; do set -- "$a"; {digest}; done; ' + "".join(
        f'set -- "$V{i}"; {digest}; ' for i in range(len(carried))
    )
    app = kit.app(script)
    role = app.roles[0]
    role.args += ["sh", *carried]
    role.env.update({f"V{i}": v for i, v in enumerate(carried)})

    before = {a.app_id for a in kit.scheduler.list(kit.cfg)}
    # a value no backend can carry (a NUL byte) is refused at dryrun, and nothing is submitted
    for nul_value in [v for v in values if "\x00" in v] or ["a\x00b"]:
        nul = kit.app("true")
        nul.roles[0].args.append(nul_value)
        assert _try_dryrun(kit, nul) is None
    assert {a.app_id for a in kit.scheduler.list(kit.cfg)} == before

    app_id = kit.scheduler.schedule(kit.scheduler.submit_dryrun(app, kit.cfg))
    seen = _watch(kit, app_id, TERMINAL)
    assert seen[-1].state == AppState.SUCCEEDED, seen[-1].msg
    deadline = time.monotonic() + 60
    expected = [hashlib.sha256(v.encode()).hexdigest() for v in carried] * 2
    while True:  # a log store may take a moment to have every line
        lines = [line.strip() for line in kit.scheduler.log_iter(app_id, ROLE, 0)]
        if lines[-len(expected) :] == expected or time.monotonic() > deadline:
            break
        time.sleep(1)
    got = lines[-len(expected) :]
    for i, (want, have) in enumerate(zip(expected, got, strict=True)):
        value = carried[i % len(carried)]
        assert have == want, f"value {value[:80]!r} (as {'arg' if i < len(carried) else 'env'})"
