"""An evaluation program that reports back to Dagster with Dagster Pipes.

Launched by the `model_report` asset of definitions.py through PipesAnylaunchClient, which
puts the Pipes bootstrap env into the app; `open_dagster_pipes()` picks it up. Needs only the
small `dagster-pipes` package, not Dagster.
"""

import sys
from pathlib import Path

from dagster_pipes import open_dagster_pipes


def main() -> int:
    model_dir = Path(sys.argv[1] if len(sys.argv) > 1 else "model")
    with open_dagster_pipes() as pipes:
        weights = sorted(model_dir.glob("weights-*.txt"))
        pipes.log.info(f"evaluating {len(weights)} weight file(s) from {model_dir}")
        threshold = pipes.get_extra("accuracy_threshold")
        accuracy = 0.93
        print(f"accuracy={accuracy}", flush=True)
        pipes.report_asset_materialization(
            metadata={
                "accuracy": {"raw_value": accuracy, "type": "float"},
                "weight_files": {"raw_value": len(weights), "type": "int"},
            },
        )
        pipes.report_asset_check(
            check_name="accuracy_above_threshold",
            passed=accuracy >= threshold,
            metadata={"threshold": {"raw_value": threshold, "type": "float"}},
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
