"""The suite does not depend on how it was launched: started as a background job (SIGINT
ignored, as a non-interactive shell or ``nohup ... &`` leaves it), the tests that send Ctrl-C
to a child still pass (``tests/conftest.py`` restores the default handler)."""

import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ctrl_c_tests_pass_when_the_suite_starts_with_sigint_ignored() -> None:
    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    argv = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/cli/test_cli.py", "-k", "ctrl_c"]
    result = subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        preexec_fn=ignore_sigint,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and "2 passed" in result.stdout, result.stdout[-2000:]
