"""What the engine-scale benchmark measures, and how.

- triggerer CPU seconds and peak RSS: sampled from /proc over the triggerer's process tree
  (``TreeSampler``); the triggerer is restarted before every run, so each run starts from a
  fresh process. The CPU is also split between the trigger runner (the child process where
  the triggers run) and the supervisor (Airflow's database work for every trigger).
- API server requests by verb and resource: ``apiserver_request_total`` from the API server's
  ``/metrics``, before/after delta (every client: the waiters, and the controllers and kubelet
  that run the same pods). Slurm: controller RPCs by message type from ``sdiag``, delta.
- API server requests by who made them: the API server's audit log (one JSON event per request
  stage, written by scripts/provision/30-kubernetes.sh's kube-apiserver), read from where it
  stood before the run. "engine" is the Airflow side (operators in the workers, triggers in the
  triggerer) in the run's namespace; the control plane (controllers, scheduler, kubelet, the API
  server itself) runs the same pods for both waiters, and the benchmark's own client
  (:data:`BENCH_AGENT`) is counted apart.
- delay from a job's end to its task's success: the job's end is the pod container's
  ``State.FinishedAt`` from the Docker engine (nanoseconds; the pod status's ``finishedAt`` has
  whole seconds only), or the time the job script noted when it ended (local_cwd, Slurm); the
  task's success is the task instance's ``end_date``. On Kubernetes it is also split at the
  kubelet's first pod status report after the exit (audit log): the control plane's part and
  the waiter's and engine's part (``delay_split``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.deployments.processes import descendants, wait_until

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20
DOCKER_HOST = os.environ.get("DOCKER_HOST", "unix:///run/anylaunch-backends/docker/docker.sock")


# --- triggerer CPU and memory ------------------------------------------------------------------


def _cpu_and_rss(pid: int) -> tuple[float, float]:
    """CPU seconds (its own and its reaped children's) and RSS (MiB) of one process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0, 0.0
    # fields[0] is the state (field 3); utime, stime, cutime, cstime are fields 14-17
    ticks = sum(int(f) for f in fields[11:15])
    return ticks / CLK_TCK, pages * PAGE_MB


def tree_usage(pid: int) -> tuple[float, float]:
    """CPU seconds and RSS (MiB) of ``pid`` and every live descendant. A live process's
    ``cutime`` holds only its reaped children, so nothing is counted twice."""
    cpu = rss = 0.0
    for p in (pid, *descendants(pid)):
        c, r = _cpu_and_rss(p)
        cpu += c
        rss += r
    return cpu, rss


class TreeSampler:
    """Samples a process tree's CPU and RSS every ``interval`` seconds in a thread, and the
    CPU of its root on its own (an Airflow 3 triggerer's root is the supervisor, which does
    the database work; the triggers run in its child, the trigger runner)."""

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        self.pid = pid
        self.interval = interval
        self.start_cpu, _ = tree_usage(pid)
        self.max_cpu = self.start_cpu
        self.start_root_cpu, _ = _cpu_and_rss(pid)
        self.max_root_cpu = self.start_root_cpu
        self.peak_rss = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            cpu, rss = tree_usage(self.pid)
            self.max_cpu = max(self.max_cpu, cpu)
            self.max_root_cpu = max(self.max_root_cpu, _cpu_and_rss(self.pid)[0])
            self.peak_rss = max(self.peak_rss, rss)
            self._stop.wait(self.interval)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def cpu_s(self) -> float:
        return self.max_cpu - self.start_cpu

    @property
    def root_cpu_s(self) -> float:
        return self.max_root_cpu - self.start_root_cpu


class TreesSampler:
    """Samples the CPU and RSS of process trees whose roots are found while it runs (e.g. a
    Dagster run worker, started for each run): ``find_roots`` is asked every ``interval``
    seconds. A root there from the start counts from its CPU then; one found later from 0 (it
    started during the run). A tree that ends keeps the CPU of its last sample."""

    def __init__(self, find_roots: Callable[[], Iterable[int]], interval: float = 0.25) -> None:
        self.find_roots = find_roots
        self.interval = interval
        self._cpu: dict[int, tuple[float, float]] = {}  # root -> (CPU when found, highest)
        for root in find_roots():
            cpu, _ = tree_usage(root)
            self._cpu[root] = (cpu, cpu)
        self.peak_rss = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            rss = 0.0
            for root in {*self._cpu, *self.find_roots()}:
                if not Path(f"/proc/{root}").exists():
                    continue
                cpu, tree_rss = tree_usage(root)
                first, highest = self._cpu.get(root, (0.0, 0.0))
                self._cpu[root] = (first, max(highest, cpu))
                rss += tree_rss
            self.peak_rss = max(self.peak_rss, rss)
            self._stop.wait(self.interval)

    def __enter__(self) -> TreesSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def cpu_s(self) -> float:
        return sum(highest - first for first, highest in self._cpu.values())

    @property
    def roots(self) -> list[int]:
        """Every root seen."""
        return sorted(self._cpu)


def new_top_processes(parent: int, before: Iterable[int]) -> list[int]:
    """The descendants of ``parent`` started since ``before`` (its descendants then) whose
    parent was there before: the roots of the process trees started meanwhile."""
    old = {parent, *before}
    found = []
    for pid in descendants(parent):
        if pid in old:
            continue
        try:
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid in old:
            found.append(pid)
    return found


# --- API server and Slurm controller load ------------------------------------------------------

_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def apiserver_requests(metrics: str) -> Counter[str]:
    """``apiserver_request_total`` summed by ``"VERB resource[/subresource]"`` (resource
    requests only; the scrape itself is a non-resource request and is left out).

    >>> apiserver_requests('apiserver_request_total{code="200",resource="pods",verb="GET"} 3\\n'
    ...     'apiserver_request_total{code="404",resource="pods",verb="GET"} 1\\n'
    ...     'apiserver_request_total{code="200",resource="",verb="GET"} 9')
    Counter({'GET pods': 4})
    """
    counts: Counter[str] = Counter()
    for line in metrics.splitlines():
        match = _SAMPLE.match(line)
        if not match:
            continue
        labels = dict(_LABEL.findall(match["labels"]))
        resource = labels.get("resource", "")
        if not resource:
            continue
        if labels.get("subresource"):
            resource += "/" + labels["subresource"]
        counts[f"{labels.get('verb', '?')} {resource}"] += int(float(match["value"]))
    return counts


def scrape_apiserver(client: Any) -> Counter[str]:
    return apiserver_requests(client.text("/metrics", {}))


def sdiag_rpcs() -> Counter[str]:
    """slurmctld's RPC counts by message type (``sdiag``; its own REQUEST_STATS_INFO left out)."""
    out = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    section = out.split("Remote Procedure Call statistics by message type", 1)[-1]
    section = section.split("Remote Procedure Call statistics by user", 1)[0]
    counts = Counter(
        {
            m[1]: int(m[2])
            for m in re.finditer(r"^\s+(\w+)\s+\(\s*\d+\)\s+count:(\d+)", section, re.M)
        }
    )
    counts.pop("REQUEST_STATS_INFO", None)
    return counts


def delta(after: Counter[str], before: Counter[str]) -> dict[str, int]:
    """Positive differences, biggest first."""
    diff = {k: after[k] - before.get(k, 0) for k in after}
    return dict(sorted(((k, v) for k, v in diff.items() if v > 0), key=lambda kv: -kv[1]))


# --- API requests by client: the audit log --------------------------------------------------------

#: The API server's audit log (scripts/provision/30-kubernetes.sh); rotated files beside it are
#: named ``audit-<time>.log``.
AUDIT_LOG = Path("/var/lib/anylaunch-backends/kubernetes/audit.log")
#: The user agent of the benchmark's own API client (namespaces, /metrics scrapes).
BENCH_AGENT = "anylaunch-bench/1"
#: User agents of the control plane: the same work per pod whichever waiter runs.
CONTROL_PLANE_AGENTS = (
    "kube-controller-manager/",
    "kube-scheduler/",
    "kubelet/",
    "kube-apiserver/",
)
#: Client classes, in report order. "other": a client outside the run (another namespace).
CLIENT_CLASSES = ("engine", "control plane", "bench", "other")
#: Audit stages of a request that was answered (RequestReceived is omitted by the policy; a
#: long request such as a watch logs ResponseStarted and ResponseComplete: counted once).
_ANSWERED = ("ResponseStarted", "ResponseComplete", "Panic")
#: Audit verbs as ``apiserver_request_total`` names them (the rest: upper-cased).
_VERBS = {"create": "POST", "update": "PUT"}


@dataclass(frozen=True)
class AuditMark:
    """Where the audit log stood when a measurement began."""

    path: Path
    inode: int | None  # None: there was no log yet
    head: bytes  # the file's first line: an inode number alone may be reused by a new file
    offset: int
    time: float


def _head(path: Path) -> bytes:
    """The first line of a file (at most 4 KiB; its first event names a unique auditID)."""
    with path.open("rb") as f:
        return f.readline(4096)


def audit_mark(path: Path = AUDIT_LOG) -> AuditMark:
    """The audit log's current end (and the time), to read from after the run."""
    now = time.time()
    try:
        stat = path.stat()
        head = _head(path)
    except FileNotFoundError:
        return AuditMark(path, None, b"", 0, now)
    return AuditMark(path, stat.st_ino, head, stat.st_size, now)


def audit_files(mark: AuditMark) -> tuple[list[tuple[Path, int]], bool]:
    """The log files written since ``mark``, oldest first, each with the byte offset to read
    from, and whether the file ``mark`` was taken in is still there (False: it was rotated out,
    so the start of the window is lost). A rotated file (``audit-<time>.log``) is the same
    file under a new name: read on from the mark's offset; files written after the mark are
    read whole; older rotated files are skipped."""
    stem, suffix = mark.path.stem, mark.path.suffix
    candidates = [mark.path, *mark.path.parent.glob(f"{stem}-*{suffix}")]
    found: list[tuple[float, Path, int]] = []
    marked_file_seen = mark.inode is None
    for path in candidates:
        try:
            stat = path.stat()
            same = stat.st_ino == mark.inode and _head(path).startswith(mark.head)
        except FileNotFoundError:  # rotated away meanwhile
            continue
        if same and stat.st_size >= mark.offset:
            marked_file_seen = True
            found.append((stat.st_mtime, path, mark.offset))
        elif stat.st_mtime >= mark.time - 1:
            found.append((stat.st_mtime, path, 0))
    found.sort(key=lambda f: f[0])
    return [(path, offset) for _, path, offset in found], marked_file_seen


def audit_lines(files: Iterable[tuple[Path, int]]) -> Iterator[str]:
    """The lines of ``files``, each from its offset (a file gone meanwhile is skipped)."""
    for path, offset in files:
        try:
            with path.open("rb") as f:
                f.seek(offset)
                for raw in f:
                    yield raw.decode("utf-8", "replace")
        except FileNotFoundError:
            continue


def client_class(user_agent: str) -> str:
    """Who made a request, by its user agent: ``"control plane"``, ``"bench"`` or
    ``"engine"`` (anything else).

    >>> client_class("kubelet/v1.20.2 (linux/amd64) kubernetes/faecb19")
    'control plane'
    >>> client_class(BENCH_AGENT), client_class("OpenAPI-Generator/31.0.0/python")
    ('bench', 'engine')
    """
    if user_agent.startswith(CONTROL_PLANE_AGENTS):
        return "control plane"
    if user_agent == BENCH_AGENT:
        return "bench"
    return "engine"


def request_kind(event: Mapping[str, Any]) -> str:
    """``"VERB resource[/subresource]"`` as ``apiserver_request_total`` counts it; a
    non-resource request is ``"VERB /path"``.

    >>> request_kind({"verb": "watch", "objectRef": {"resource": "pods"}})
    'WATCH pods'
    >>> request_kind({"verb": "get", "objectRef": {"resource": "pods", "subresource": "log"}})
    'GET pods/log'
    >>> request_kind({"verb": "create", "objectRef": {"resource": "pods"}})
    'POST pods'
    >>> request_kind({"verb": "get", "requestURI": "/version?timeout=32s"})
    'GET /version'
    """
    verb = str(event.get("verb", "?"))
    verb = _VERBS.get(verb, verb.upper())
    ref = event.get("objectRef") or {}
    resource = ref.get("resource")
    if not resource:
        return f"{verb} {str(event.get('requestURI', '?')).split('?', 1)[0]}"
    if ref.get("subresource"):
        resource += "/" + ref["subresource"]
    return f"{verb} {resource}"


def _answered(
    lines: Iterable[str], start: float, end: float
) -> Iterator[tuple[dict[str, Any], float]]:
    """Each answered request of audit event ``lines`` received between ``start`` and ``end``
    (POSIX times), once however many stages it logged, with the time it was received; lines
    that are not JSON (cut by an offset, or being written) are skipped."""
    seen: set[str] = set()
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or event.get("stage") not in _ANSWERED:
            continue
        audit_id = str(event.get("auditID", ""))
        if audit_id in seen:
            continue
        try:
            received = parse_time(str(event["requestReceivedTimestamp"]))
        except (KeyError, ValueError):
            continue
        if start <= received <= end:
            seen.add(audit_id)
            yield event, received


def count_requests(
    lines: Iterable[str], start: float, end: float, namespace: str | None = None
) -> dict[str, Counter[str]]:
    """Requests the API server received between ``start`` and ``end`` (POSIX times), read
    from audit events (JSON lines), by client class (:data:`CLIENT_CLASSES`), then by
    :func:`request_kind`. A request counts once however many stages it logged (a watch: the
    request, not its events); lines that are not JSON (cut by an offset, or being written)
    are skipped.

    With ``namespace`` (the run's), an engine request in another namespace is ``"other"``
    (someone else's test), and so is a request outside any namespace (a cluster-scoped or
    non-resource one) unless its user agent also made requests in ``namespace``.

    >>> def line(uid, stage, verb, agent, t, ns="run-1", resource="pods"):
    ...     ref = {"resource": resource, "namespace": ns} if resource else None
    ...     return json.dumps({"auditID": uid, "stage": stage, "verb": verb,
    ...         "userAgent": agent, "objectRef": ref, "requestURI": "/version",
    ...         "requestReceivedTimestamp": f"2026-11-26T03:00:{t:02d}.5Z"})
    >>> engine, start = "OpenAPI-Generator/31.0.0/python", parse_time("2026-11-26T03:00:00Z")
    >>> lines = [
    ...     line("a", "ResponseComplete", "get", engine, 1),
    ...     line("b", "ResponseStarted", "watch", engine, 2),
    ...     line("b", "ResponseComplete", "watch", engine, 2),  # the same watch
    ...     line("c", "ResponseComplete", "create", "kubelet/v1.20.2", 3, resource="events"),
    ...     line("d", "ResponseComplete", "get", BENCH_AGENT, 3, ns=None, resource=None),
    ...     line("e", "ResponseComplete", "list", engine, 4, ns="someone-elses"),
    ...     line("f", "ResponseComplete", "get", engine, 5, ns=None, resource=None),
    ...     line("g", "ResponseComplete", "get", engine, 59),  # after the window
    ...     '{"auditID": "h", "stage": "ResponseCo',  # cut short
    ... ]
    >>> counts = count_requests(lines, start, start + 30, "run-1")
    >>> {k: dict(v) for k, v in counts.items()}  # doctest: +NORMALIZE_WHITESPACE
    {'engine': {'GET pods': 1, 'WATCH pods': 1, 'GET /version': 1},
     'control plane': {'POST events': 1}, 'bench': {'GET /version': 1},
     'other': {'LIST pods': 1}}
    """
    requests: list[tuple[str, str | None, str]] = []  # agent, namespace, kind
    for event, _ in _answered(lines, start, end):
        ref = event.get("objectRef") or {}
        requests.append(
            (str(event.get("userAgent", "")), ref.get("namespace"), request_kind(event))
        )
    in_run = {a for a, ns, _ in requests if namespace is None or ns == namespace}
    counts: dict[str, Counter[str]] = {c: Counter() for c in CLIENT_CLASSES}
    for agent, ns, kind in requests:
        cls = client_class(agent)
        # another namespace's, or outside any namespace from an agent not seen in the run's
        outside = (
            namespace is not None and ns != namespace and (ns is not None or agent not in in_run)
        )
        counts["other" if cls == "engine" and outside else cls][kind] += 1
    return counts


@dataclass(frozen=True)
class ClientRequests:
    """The requests of one measurement window, by client class and kind."""

    counts: dict[str, Counter[str]]
    complete: bool  # False: the log was rotated away past the window's start


def audit_requests(mark: AuditMark, end: float, namespace: str | None) -> ClientRequests | None:
    """:func:`count_requests` over the audit log from ``mark`` to ``end``; None if the log
    has no request of the window (the API server was started without an audit log: even the
    benchmark's own ``/metrics`` scrapes would be there)."""
    files, complete = audit_files(mark)
    counts = count_requests(audit_lines(files), mark.time, end, namespace)
    if not any(counts.values()):
        return None
    return ClientRequests(counts, complete)


def by_count(counts: Mapping[str, int]) -> dict[str, int]:
    """Biggest first (then by name).

    >>> by_count({"GET pods": 2, "LIST pods": 5, "DELETE pods": 2})
    {'LIST pods': 5, 'DELETE pods': 2, 'GET pods': 2}
    """
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def client_summary(requests: ClientRequests | None) -> dict[str, Any]:
    """The JSON fields of one run from the audit log: ``engine_api_requests`` (and
    ``_by_kind``), and the totals of the other client classes.

    >>> client_summary(ClientRequests({"engine": Counter({"GET pods": 3, "WATCH pods": 1}),
    ...     "control plane": Counter({"PATCH pods/status": 9}), "bench": Counter(),
    ...     "other": Counter()}, True))  # doctest: +NORMALIZE_WHITESPACE
    {'engine_api_requests': 4, 'engine_api_requests_by_kind': {'GET pods': 3, 'WATCH pods': 1},
     'control_plane_api_requests': 9, 'bench_api_requests': 0, 'other_api_requests': 0}
    >>> client_summary(None)
    {'engine_api_requests': None}
    """
    if requests is None:
        return {"engine_api_requests": None}
    engine = requests.counts["engine"]
    entry: dict[str, Any] = {
        "engine_api_requests": sum(engine.values()),
        "engine_api_requests_by_kind": by_count(engine),
    }
    for cls in CLIENT_CLASSES[1:]:
        entry[f"{cls.replace(' ', '_')}_api_requests"] = sum(requests.counts[cls].values())
    if not requests.complete:
        entry["audit_log_complete"] = False
    return entry


# --- job ends and task ends ----------------------------------------------------------------------


def parse_time(text: str) -> float:
    """An RFC 3339 time (any fraction digits, ``Z`` or an offset) as a POSIX timestamp.

    >>> end = parse_time("2026-11-25T17:00:00.123456789Z")
    >>> round(end - parse_time("2026-11-25T18:00:00+01:00"), 6)
    0.123456
    """
    text = text.replace("Z", "+00:00")
    text = re.sub(r"(\.\d{6})\d+", r"\1", text)
    return datetime.fromisoformat(text).timestamp()


@dataclass(frozen=True)
class PodExit:
    """When a benchmark pod's container exited, and the pod's name."""

    end: float
    pod: str


def pod_container_exits(namespace: str) -> dict[int, PodExit]:
    """``BENCH_INDEX`` → when the container exited and its pod, for the pods of ``namespace``."""
    docker = ["docker", "-H", DOCKER_HOST]
    ids = subprocess.run(
        [
            *docker,
            "ps",
            "-aq",
            "--filter",
            f"label=io.kubernetes.pod.namespace={namespace}",
            "--filter",
            "label=io.kubernetes.docker.type=container",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not ids:
        return {}
    inspected = json.loads(
        subprocess.run(
            [*docker, "inspect", *ids], capture_output=True, text=True, check=True
        ).stdout
    )
    exits: dict[int, PodExit] = {}
    for container in inspected:
        env = dict(e.split("=", 1) for e in container["Config"]["Env"] if "=" in e)
        state = container["State"]
        if "BENCH_INDEX" in env and not state.get("Running"):
            pod = str(container["Config"].get("Labels", {}).get("io.kubernetes.pod.name", ""))
            exits[int(env["BENCH_INDEX"])] = PodExit(parse_time(state["FinishedAt"]), pod)
    return exits


def pod_container_ends(namespace: str) -> dict[int, float]:
    """``BENCH_INDEX`` → when the container exited, for the pods of ``namespace``."""
    return {i: e.end for i, e in pod_container_exits(namespace).items()}


def kubelet_status_reports(
    lines: Iterable[str], start: float, end: float, namespace: str
) -> dict[str, list[float]]:
    """Pod name → when the kubelet's pod status updates (``PATCH pods/status``) of
    ``namespace`` reached the API server, from audit events, in order. The first one at or
    after a container's exit is when the cluster learnt of it: what any waiter can see first.

    >>> def line(uid, t, agent="kubelet/v1.20.2", name="p-1", sub="status"):
    ...     return json.dumps({"auditID": uid, "stage": "ResponseComplete", "verb": "patch",
    ...         "userAgent": agent, "objectRef": {"resource": "pods", "namespace": "run-1",
    ...         "name": name, "subresource": sub},
    ...         "requestReceivedTimestamp": f"2026-11-26T03:00:{t:02d}.5Z"})
    >>> start = parse_time("2026-11-26T03:00:00Z")
    >>> lines = [line("a", 3), line("b", 1), line("c", 2, agent="OpenAPI-Generator"),
    ...          line("d", 4, sub=None), line("e", 5, name="p-2"), line("a", 3)]
    >>> {pod: [t - start for t in times] for pod, times in
    ...  kubelet_status_reports(lines, start, start + 60, "run-1").items()}
    {'p-1': [1.5, 3.5], 'p-2': [5.5]}
    """
    reports: dict[str, list[float]] = {}
    for event, received in _answered(lines, start, end):
        ref = event.get("objectRef") or {}
        if (
            event.get("verb") == "patch"
            and ref.get("resource") == "pods"
            and ref.get("subresource") == "status"
            and ref.get("namespace") == namespace
            and str(event.get("userAgent", "")).startswith("kubelet/")
        ):
            reports.setdefault(str(ref.get("name", "")), []).append(received)
    return {pod: sorted(times) for pod, times in reports.items()}


def delay_split(
    tis: list[dict[str, Any]], exits: Mapping[int, PodExit], reports: Mapping[str, list[float]]
) -> dict[str, Any]:
    """The end-to-task delay split where the cluster learnt of the exit (the kubelet's first
    status report after it): ``kubelet_report_*`` is the control plane's part, the same for every
    waiter (the kubelet notices exits by relisting containers, every second in Kubernetes
    1.20); ``after_report_*`` is the waiter's and the engine's part.

    >>> tis = [{"map_index": 0, "end_date": "2026-11-26T03:00:05Z"}]
    >>> exits = {0: PodExit(parse_time("2026-11-26T03:00:03Z"), "p-0")}
    >>> delay_split(tis, exits, {"p-0": [exits[0].end - 1, exits[0].end + 0.5]})
    {'kubelet_report_median_s': 0.5, 'after_report_median_s': 1.5, 'after_report_p95_s': 1.5}
    """
    to_report, after_report = [], []
    for ti in tis:
        found = exits.get(ti["map_index"])
        if found is None or not ti.get("end_date"):
            continue
        report = next((t for t in reports.get(found.pod, []) if t >= found.end), None)
        if report is None:
            continue
        to_report.append(report - found.end)
        after_report.append(parse_time(ti["end_date"]) - report)
    if not to_report:
        return {}
    return {
        "kubelet_report_median_s": round(statistics.median(to_report), 3),
        "after_report_median_s": round(statistics.median(after_report), 3),
        "after_report_p95_s": round(p95(after_report), 3),
    }


def noted_ends(out: Path) -> dict[int, float]:
    """``BENCH_INDEX`` → the time the job script noted as it ended (local_cwd, Slurm)."""
    return {int(p.name): float(p.read_text()) for p in out.iterdir() if p.read_text().strip()}


def delays(tis: list[dict[str, Any]], ends: Mapping[int, float]) -> list[float]:
    """Seconds from each job's end to its task instance's end."""
    return [
        parse_time(ti["end_date"]) - ends[ti["map_index"]]
        for ti in tis
        if ti["map_index"] in ends and ti.get("end_date")
    ]


def p95(values: list[float]) -> float:
    """The 95th percentile (nearest rank).

    >>> p95([float(i) for i in range(1, 101)])
    95.0
    """
    ordered = sorted(values)
    return ordered[max(0, -(-95 * len(ordered) // 100) - 1)]


# --- one run ---------------------------------------------------------------------------------------


def measure_run(
    start: Callable[[], str],
    ended: Callable[[str], str | None],
    sampler: TreeSampler | TreesSampler,
    timeout: float,
    what: str,
    load: Callable[[], Counter[str]] | None = None,
    audit: Path | None = None,
) -> dict[str, Any]:
    """One engine run, whatever the engine: ``start()`` starts it and returns its id;
    ``ended(id)`` is its terminal state, or None while it runs. ``sampler`` samples the
    engine's processes meanwhile. ``load`` is a callable returning a Counter of cluster
    requests (scraped before and after). ``audit``: an API server audit log, whose position
    before the run (``audit_mark``) and the run's end time (``audit_end``, after the last
    scrape) are returned, for :func:`audit_requests` to read once the run's long requests
    (watches) have ended."""
    mark = audit_mark(audit) if audit else None
    before = load() if load else Counter()
    started = time.monotonic()
    with sampler:
        run_id = start()
        state = wait_until(lambda: ended(run_id), timeout, f"{what} {run_id}", interval=1.0)
    wall = time.monotonic() - started
    requests = delta(load(), before) if load else {}
    return {
        "run_id": run_id,
        "audit_mark": mark,
        "audit_end": time.time(),
        "state": state,
        "wall_s": round(wall, 1),
        "cpu_s": round(sampler.cpu_s, 2),
        "peak_rss_mib": round(sampler.peak_rss, 1),
        "requests": requests,
    }


def summarize_engine(measured: dict[str, Any], ends: Mapping[int, float]) -> dict[str, Any]:
    """The JSON entry of one Prefect or Dagster run: ``measured["tis"]`` holds the engine's
    record of each task's end in the shape of Airflow's task instances (``map_index``: the
    job's ``BENCH_INDEX``, ``end_date``, ``state``)."""
    tis = measured["tis"]
    waits = delays(tis, ends)
    entry: dict[str, Any] = {
        "api_requests": sum(measured["requests"].values()) if measured["requests"] else None,
        "engine_cpu_s": measured["cpu_s"],
        "peak_rss_mib": measured["peak_rss_mib"],
        "delay_median_s": round(statistics.median(waits), 3) if waits else None,
        "delay_p95_s": round(p95(waits), 3) if waits else None,
        "tasks": len(tis),
        "task_states": dict(Counter(ti["state"] for ti in tis)),
        "delays_measured": len(waits),
        "wall_s": measured["wall_s"],
        "run_state": measured["state"],
    }
    if measured["requests"]:
        entry["api_requests_by_kind"] = measured["requests"]
    return entry


def summarize(measured: dict[str, Any], ends: Mapping[int, float], load_key: str) -> dict[str, Any]:
    """The JSON entry of one run."""
    tis = measured["tis"]
    waits = delays(tis, ends)
    states = Counter(ti["state"] for ti in tis)
    entry: dict[str, Any] = {
        load_key: sum(measured["requests"].values()) if measured["requests"] else None,
        "triggerer_cpu_s": measured["triggerer_cpu_s"],
        # the trigger runner (where the triggers run) and the supervisor (the database work)
        "triggerer_runner_cpu_s": round(
            measured["triggerer_cpu_s"] - measured["triggerer_supervisor_cpu_s"], 2
        ),
        "triggerer_supervisor_cpu_s": measured["triggerer_supervisor_cpu_s"],
        "triggerer_peak_rss_mb": measured["triggerer_peak_rss_mb"],
        "delay_median_s": round(statistics.median(waits), 3) if waits else None,
        "delay_p95_s": round(p95(waits), 3) if waits else None,
        "tasks": len(tis),
        "task_states": dict(states),
        "delays_measured": len(waits),
        "wall_s": measured["wall_s"],
    }
    if measured["requests"]:
        entry[f"{load_key}_by_kind"] = measured["requests"]
    return entry


@contextlib.contextmanager
def scratch_dir(path: Path) -> Iterator[Path]:
    """An empty directory every user can write to (Slurm jobs may run as another user)."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    path.chmod(0o777)
    yield path
