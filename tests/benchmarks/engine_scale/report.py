"""``.benchmarks/engine_scale.json`` (Airflow) and the plot beside it, and
``.benchmarks/engine_scale_prefect.json``, ``.benchmarks/engine_scale_dagster.json``: each merged
run by run, ``{backend: {N: {tool: entry}}}``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
OUT = REPO / ".benchmarks"
JSON_PATH = OUT / "engine_scale.json"
PNG_PATH = OUT / "engine_scale.png"
#: The Prefect and Dagster results (tools ``anylaunch`` and ``incumbent``).
ENGINE_PATHS = {
    "prefect": OUT / "engine_scale_prefect.json",
    "dagster": OUT / "engine_scale_dagster.json",
}
ENGINE_METRICS = (
    ("engine_api_requests", "engine API requests"),
    ("engine_cpu_s", "engine CPU s"),
    ("peak_rss_mib", "engine peak RSS MiB"),
    ("delay_median_s", "delay median s"),
    ("delay_p95_s", "delay p95 s"),
)
METRICS = (
    ("api_requests", "API server requests (all clients)"),
    ("engine_api_requests", "API server requests by the engine"),
    ("triggerer_cpu_s", "triggerer CPU (s)"),
    ("triggerer_peak_rss_mb", "triggerer peak RSS (MiB)"),
    ("delay_median_s", "job end -> task success, median (s)"),
    ("delay_p95_s", "job end -> task success, p95 (s)"),
)


def record(
    backend: str, n: int, tool: str, entry: dict[str, Any], engine: str = "airflow"
) -> dict[str, Any]:
    """Adds one run's entry to the engine's JSON file (keeping every other run's); for
    Airflow also redraws the plot."""
    path = JSON_PATH if engine == "airflow" else ENGINE_PATHS[engine]
    OUT.mkdir(exist_ok=True)
    data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    data.setdefault(backend, {}).setdefault(str(n), {})[tool] = entry
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    if engine == "airflow":
        plot(data)
    return data


def plot(data: dict[str, Any]) -> None:
    """One panel per metric: a line per (backend, tool) over N."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(METRICS), figsize=(4.2 * len(METRICS), 3.6))
    for ax, (key, title) in zip(axes, METRICS, strict=True):
        for backend, by_n in sorted(data.items()):
            tools = sorted({t for runs in by_n.values() for t in runs})
            for tool in tools:
                points = sorted(
                    (int(n), runs[tool][key])
                    for n, runs in by_n.items()
                    if tool in runs and runs[tool].get(key) is not None
                )
                if points:
                    xs, ys = zip(*points, strict=True)
                    ax.plot(xs, ys, marker="o", label=f"{backend}: {tool}")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("N deferred tasks")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(PNG_PATH, dpi=110)
    plt.close(fig)


def table(data: dict[str, Any]) -> str:
    """The results as a Markdown table (the README's performance section).

    >>> print(table({"slurm": {"50": {"naive": {"api_requests": 900, "triggerer_cpu_s": 2.5,
    ...     "triggerer_peak_rss_mb": 300.0, "delay_median_s": 3.1, "delay_p95_s": 4.0}}}}))
    | backend | N | waiter | API requests | engine API requests | triggerer CPU s | triggerer peak RSS MiB | delay median s | delay p95 s |
    |---|---|---|---|---|---|---|---|---|
    | slurm | 50 | naive | 900 | - | 2.5 | 300.0 | 3.1 | 4.0 |
    """
    lines = [
        "| backend | N | waiter | API requests | engine API requests | triggerer CPU s "
        "| triggerer peak RSS MiB | delay median s | delay p95 s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for backend, by_n in sorted(data.items()):
        for n, runs in sorted(by_n.items(), key=lambda kv: int(kv[0])):
            for tool, entry in sorted(runs.items()):
                cells = [entry.get(key) for key, _ in METRICS]
                shown = ["-" if c is None else str(c) for c in cells]
                lines.append(f"| {backend} | {n} | {tool} | " + " | ".join(shown) + " |")
    return "\n".join(lines)


def _ratio(incumbent: Any, anylaunch: Any) -> str:
    """``incumbent / anylaunch`` as ``"12.3x"``; ``"-"`` when either is missing (or zero).

    >>> _ratio(7981, 650), _ratio(10, None), _ratio(3, 0)
    ('12.3x', '-', '-')
    """
    if not incumbent or not anylaunch:
        return "-"
    return f"{incumbent / anylaunch:.1f}x"


def ratios(data: dict[str, Any]) -> str:
    """Requests of each incumbent against anylaunch's on the same backend and N, as a Markdown
    table: those the engine side made (operators and triggers; the audit log) and those of
    every client (the API server's or slurmctld's counters).

    >>> print(ratios({"kubernetes": {"200": {
    ...     "anylaunch": {"api_requests": 11828, "engine_api_requests": 640},
    ...     "kpo": {"api_requests": 13710, "engine_api_requests": 8600}}}}))
    | backend | N | incumbent | engine requests: anylaunch | incumbent | incumbent / anylaunch | all requests: anylaunch | incumbent | incumbent / anylaunch |
    |---|---|---|---|---|---|---|---|---|
    | kubernetes | 200 | kpo | 640 | 8600 | 13.4x | 11828 | 13710 | 1.2x |
    """
    lines = [
        "| backend | N | incumbent | engine requests: anylaunch | incumbent "
        "| incumbent / anylaunch | all requests: anylaunch | incumbent | incumbent / anylaunch |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for backend, by_n in sorted(data.items()):
        for n, runs in sorted(by_n.items(), key=lambda kv: int(kv[0])):
            ours = runs.get("anylaunch")
            if ours is None:
                continue
            for tool, theirs in sorted(runs.items()):
                if tool.startswith("anylaunch"):  # ours, not an incumbent
                    continue
                cells: list[str] = []
                for key in ("engine_api_requests", "api_requests"):
                    a, b = ours.get(key), theirs.get(key)
                    cells += ["-" if a is None else str(a), "-" if b is None else str(b)]
                    cells.append(_ratio(b, a))
                lines.append(f"| {backend} | {n} | {tool} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def engine_table(data: dict[str, Any]) -> str:
    """A Prefect or Dagster result file as a Markdown table, with anylaunch's requests and
    CPU against the incumbent's.

    >>> print(engine_table({"kubernetes": {"200": {
    ...     "anylaunch": {"engine_api_requests": 100, "engine_cpu_s": 5.0, "peak_rss_mib": 200.0,
    ...                   "delay_median_s": 1.0, "delay_p95_s": 2.0},
    ...     "incumbent": {"engine_api_requests": 900, "engine_cpu_s": 20.0, "peak_rss_mib": 300.0,
    ...                   "delay_median_s": 3.0, "delay_p95_s": 6.0}}}}))
    | backend | N | waiter | engine API requests | engine CPU s | engine peak RSS MiB | delay median s | delay p95 s |
    |---|---|---|---|---|---|---|---|
    | kubernetes | 200 | anylaunch | 100 | 5.0 | 200.0 | 1.0 | 2.0 |
    | kubernetes | 200 | incumbent | 900 | 20.0 | 300.0 | 3.0 | 6.0 |
    | kubernetes | 200 | incumbent / anylaunch | 9.0x | 4.0x | 1.5x | 3.0x | 3.0x |
    """
    lines = [
        "| backend | N | waiter | " + " | ".join(t for _, t in ENGINE_METRICS) + " |",
        "|---|---|---" + "|---" * len(ENGINE_METRICS) + "|",
    ]
    for backend, by_n in sorted(data.items()):
        for n, runs in sorted(by_n.items(), key=lambda kv: int(kv[0])):
            for tool in ("anylaunch", "incumbent"):
                if tool in runs:
                    cells = [runs[tool].get(key) for key, _ in ENGINE_METRICS]
                    shown = ["-" if c is None else str(c) for c in cells]
                    lines.append(f"| {backend} | {n} | {tool} | " + " | ".join(shown) + " |")
            if "anylaunch" in runs and "incumbent" in runs:
                ours, theirs = runs["anylaunch"], runs["incumbent"]
                cells = [_ratio(theirs.get(key), ours.get(key)) for key, _ in ENGINE_METRICS]
                lines.append(
                    f"| {backend} | {n} | incumbent / anylaunch | " + " | ".join(cells) + " |"
                )
    return "\n".join(lines)


if __name__ == "__main__":
    if JSON_PATH.exists():
        results = json.loads(JSON_PATH.read_text())
        print(table(results))
        print()
        print(ratios(results))
    for engine, path in ENGINE_PATHS.items():
        if path.exists():
            print(f"\n{engine}:\n")
            print(engine_table(json.loads(path.read_text())))
