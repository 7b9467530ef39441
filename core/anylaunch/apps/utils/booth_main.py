"""Evaluates the Booth function and records the result (the program of ``utils.booth``).

.. code:: shell-session

    $ python3 -m anylaunch.apps.utils.booth_main --x1 1 --x2 3 --trial_idx 0 \\
        --tracker_base /tmp/anylaunch-booth
    $ cat /tmp/anylaunch-booth/0
    {"booth_eval": 0.0}

The result is the JSON document ``{"booth_eval": f}`` at ``{tracker_base}/{trial_idx}``;
``tracker_base`` may be any fsspec URL (e.g. ``s3://bucket/hpo/run1``).
"""

from __future__ import annotations

import argparse
import json
import sys

DEFAULT_TRACKER_BASE = "/tmp/anylaunch-booth"


def booth(x1: float, x2: float) -> float:
    """The Booth function ``(x1 + 2*x2 - 7)^2 + (2*x1 + x2 - 5)^2``; its minimum is f(1, 3) = 0.

    >>> booth(1, 3), booth(0, 0)
    (0, 74)

    Args:
        x1: first coordinate
        x2: second coordinate

    Returns:
        the function's value
    """
    return (x1 + 2 * x2 - 7) ** 2 + (2 * x1 + x2 - 5) ** 2


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parses the command line.

    Args:
        argv: the arguments (without the program name)

    Returns:
        the parsed arguments
    """
    parser = argparse.ArgumentParser(description="evaluates the booth function at (x1, x2)")
    parser.add_argument("--x1", type=float, required=True, help="x1")
    parser.add_argument("--x2", type=float, required=True, help="x2")
    parser.add_argument(
        "--tracker_base",
        default=DEFAULT_TRACKER_BASE,
        help="URI of the output directory the result is written under",
    )
    parser.add_argument(
        "--trial_idx", type=int, default=0, help="trial index (ignore if not running hpo)"
    )
    return parser.parse_args(argv)


def record(tracker_base: str, trial_idx: int, value: float) -> None:
    """Writes ``{"booth_eval": value}`` as JSON to ``{tracker_base}/{trial_idx}``.

    Args:
        tracker_base: the output directory (fsspec URL); created if missing
        trial_idx: the trial's index, the result's key
        value: the result
    """
    import fsspec  # imported here: computing the value must not need it

    mapper = fsspec.get_mapper(tracker_base, create=True)
    mapper[str(trial_idx)] = json.dumps({"booth_eval": value}, indent=2).encode("utf-8")


def main(argv: list[str] | None = None) -> None:
    """Runs the program: evaluates, prints and records the result.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``)
    """
    args = parse_args(sys.argv[1:] if argv is None else argv)
    value = booth(args.x1, args.x2)
    print(f"booth({args.x1}, {args.x2}) = {value}", flush=True)
    try:
        record(args.tracker_base, args.trial_idx, value)
    except (OSError, ValueError) as e:
        raise SystemExit(f"cannot record the result: {type(e).__name__}: {e}") from e
    print(f"wrote {args.tracker_base.rstrip('/')}/{args.trial_idx}", flush=True)


if __name__ == "__main__":
    main()
