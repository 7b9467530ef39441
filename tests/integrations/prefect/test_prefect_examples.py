"""The Prefect examples run as they are (from the repository root) against the test server."""

import pytest

from anylaunch.specs.api import AppState


@pytest.mark.parametrize(
    "example, expected",
    [
        ("run_app_flow.py", ["hello from anylaunch", "final state: SUCCEEDED"]),
        ("saved_blocks.py", ["the token is ***", "final state: SUCCEEDED"]),
        ("tasks_flow.py", ["rank 0 step 2 loss 0.333", "rank 0 ended with"]),
    ],
)
def test_example_runs(pf, example: str, expected: list) -> None:
    out = pf.run_python([f"examples/prefect/{example}"])

    output = out.stdout + out.stderr
    assert out.returncode == 0, output[-5000:]
    for text in expected:
        assert text in output, output[-5000:]
    assert "example-token-not-a-real-secret" not in output
    assert [app.state for app in pf.launched_apps()] == [AppState.SUCCEEDED]
