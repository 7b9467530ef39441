"""Stand-in IBM Spectrum LSF commands (``bsub``, ``bjobs``, ``bkill``, ``bhosts``) for the lsf
tests (``bhosts`` is in lsf_hosts.py).

No LSF can be installed on the test machines, so these commands are the test backend. They
follow the LSF 10.1 command contract as documented by IBM:

- ``bsub [options] command [args]`` joins the command words with spaces (LSF runs the command
  line through ``/bin/sh``); with no command, the job script is read from stdin (``#BSUB``
  lines at its top are options). It prints ``Job <ID> is submitted to [default ]queue <Q>.``.
  Options: ``-J`` (job arrays ``name[1-4,7]%2``), ``-Jd``, ``-q``, ``-P``, ``-n min[,max]``,
  ``-R`` (``select[] order[] rusage[] span[] same[] cu[] affinity[]`` sections; memory with
  the units KB/MB/GB/TB/PB/EB/ZB or K/M/G/..., and ``/task``, ``/job``, ``/host``), ``-gpu``,
  ``-o``/``-oo``/``-e``/``-eo`` (``%J``/``%I`` expanded), ``-cwd``, ``-env``, ``-w``
  (``started()``/``done()``/``ended()``/``exit()`` with ``&&``, ``||``, ``!``), ``-H``, ``-K``
  and more that are accepted and recorded. Unknown options, malformed ``-R``/``-gpu``/``-n``/
  ``-env``/``-w`` strings, unknown queues, a missing command: rejected on stderr with exit 255.
- Job arrays: ``-J "name[1-20]%4"`` (name of ``[A-Za-z0-9._-]``, at most 255 characters,
  indices 1..MAX_JOB_ARRAY_SIZE), one record per element (``LSB_JOBINDEX``, ``%I``), the
  ``%K`` limit of running elements; bjobs shows elements as JOBID (``jobindex`` field, name
  ``name[IDX]``), or ``JOBID[IDX]`` under LSB_BJOBS_DISPLAY_ENH=Y.
- ``bjobs [-a|-d|-p|-r|-s] [-u U] [-q Q] [-P P] [-J NAME] [-Jd DESC] [-o FORMAT [-json]]
  [-noheader] [JOBID ...]``: ``-o`` fields, JSON ``{"COMMAND":"bjobs","JOBS":n,"RECORDS":[...]}``.
- ``bkill [-s SIG] [-J NAME] [-q Q] [-u U] [-r] JOBID|"JOBID[i]"|0 ...``: SIGINT and SIGTERM,
  then SIGKILL after the job terminate interval; the job ends EXIT with ``TERM_OWNER``.

Each job really runs: ``bsub`` records it under the state directory named by
``$ANYLAUNCH_LSF_STANDIN_DIR`` and starts a detached runner (the sbatchd of that job) which
keeps it PEND until it can be dispatched (dependencies, a dispatch delay, resources that fit a
host), runs the command under ``/bin/sh`` in its own process group with stdout/stderr to the
``-o``/``-e`` files, and records RUN, then DONE or EXIT with the real exit code. A job whose
runner died shows as UNKWN, as LSF shows jobs on an unreachable host.

``cluster.json`` in the state directory configures queues, hosts, the dispatch delay and the
terminate interval (see :data:`DEFAULT_CONFIG`). Tests import :func:`force_stat` to put a job in
states only the cluster can cause (SSUSP, UNKWN, ZOMBI, ...). Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

STATE_ENV = "ANYLAUNCH_LSF_STANDIN_DIR"
HERE = os.path.dirname(os.path.abspath(__file__))
FAIL = 255
FINISHED = ("DONE", "EXIT")
STARTED = ("RUN", "USUSP", "SSUSP", "DONE", "EXIT", "UNKWN", "ZOMBI")
SUSPENDED = ("PSUSP", "USUSP", "SSUSP")
POLL_S = 0.03

DEFAULT_CONFIG: dict[str, Any] = {
    "cluster": "standin",
    "default_queue": "normal",
    "queues": ["normal", "short", "gpu"],
    "hosts": [{"name": socket.gethostname(), "ncpus": 8, "ngpus": 4, "maxmem_mb": 65536}],
    # LSF_UNIT_FOR_LIMITS: the unit of a memory value given without one
    "unit_for_limits": "MB",
    # seconds a job stays PEND at least (mbatchd's dispatch turn)
    "dispatch_delay_s": 0.0,
    # JOB_TERMINATE_INTERVAL: seconds between SIGTERM and SIGKILL on bkill
    "job_terminate_interval_s": 10.0,
    # MAX_PEND_JOBS (lsb.users): a user's pending-job limit; bsub rejects jobs beyond it
    "max_pend_jobs": None,
    # what `bjobs -o ... -json` prints when no job matches: "records" (an empty RECORDS list,
    # exit 0) or "message" ("No job found" on stderr, exit 255)
    "json_when_empty": "records",
    # LSB_BJOBS_DISPLAY_ENH (lsf.conf; also read from the environment): bjobs shows an array
    # element's JOBID as JOBID[INDEX] instead of JOBID
    "bjobs_display_enh": False,
    # MAX_JOB_ARRAY_SIZE (lsb.params): the largest array index
    "max_job_array_size": 1000,
}

_UNITS_MB = {
    "K": 1 / 1024,
    "M": 1,
    "G": 1024,
    "T": 1024**2,
    "P": 1024**3,
    "E": 1024**4,
    "Z": 1024**5,
}
_MEM = re.compile(r"^(\d+(?:\.\d+)?)([KMGTPEZ]B?)?(?:/(task|job|host))?$", re.IGNORECASE)
_NUMBER = re.compile(r"^\d+(?:\.\d+)?(?:/(task|job|host))?$")
_RES_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SECTION = re.compile(r"\s*(select|order|rusage|span|same|cu|affinity)\s*\[")
_GPU_KEYS = {
    "num": re.compile(r"^[1-9]\d*(/(task|host))?$"),
    "mode": re.compile(r"^(shared|exclusive_process)$"),
    "mps": re.compile(r"^(yes|no|per_socket|per_gpu)(,(share|nocvd))*$"),
    "j_exclusive": re.compile(r"^(yes|no)$"),
    "aff": re.compile(r"^(yes|no)$"),
    "block": re.compile(r"^(yes|no)$"),
    "gpack": re.compile(r"^(yes|no)$"),
    "gvendor": re.compile(r"^(amd|nvidia)$"),
    "gmodel": re.compile(r"^\S+$"),
    "gmem": re.compile(r"^\d+[KMGT]?B?$", re.IGNORECASE),
    "gtile": re.compile(r"^(\d+|!)$"),
    "glink": re.compile(r"^(yes|no)$"),
    "nvlink": re.compile(r"^(yes|no)$"),
}
_ARRAY = re.compile(r"^(?P<base>[^\[\]]+)\[(?P<spec>[^\]]+)\](?:%(?P<limit>\d+))?$")
_JOBREF = re.compile(r"^(?P<id>\d+)(?:\[(?P<index>\d+)\])?$")

# bjobs -o field name -> JSON key; aliases map to the full field
_FIELDS = {
    "jobid": "JOBID",
    "jobindex": "JOBINDEX",
    "job_name": "JOB_NAME",
    "stat": "STAT",
    "user": "USER",
    "queue": "QUEUE",
    "proj_name": "PROJ_NAME",
    "job_description": "JOB_DESCRIPTION",
    "exit_code": "EXIT_CODE",
    "exit_reason": "EXIT_REASON",
    "pend_reason": "PEND_REASON",
    "from_host": "FROM_HOST",
    "exec_host": "EXEC_HOST",
    "submit_time": "SUBMIT_TIME",
    "start_time": "START_TIME",
    "finish_time": "FINISH_TIME",
    "output_file": "OUTPUT_FILE",
    "error_file": "ERROR_FILE",
    "sub_cwd": "SUB_CWD",
    "exec_cwd": "EXEC_CWD",
    "nreq_slot": "NREQ_SLOT",
    "nalloc_slot": "NALLOC_SLOT",
    "command": "COMMAND",
    "pids": "PIDS",
}
_ALIASES = {"id": "jobid", "name": "job_name", "proj": "proj_name", "cmd": "command"}

_BSUB_VALUE = {
    "-J", "-Jd", "-q", "-P", "-n", "-R", "-gpu", "-o", "-oo", "-e", "-eo", "-cwd", "-env",
    "-w", "-W", "-We", "-M", "-m", "-G", "-g", "-u", "-app", "-sla", "-E", "-Ep", "-outdir",
    "-i", "-is", "-L", "-c", "-b", "-t", "-sp", "-C", "-D", "-F", "-S", "-v", "-k", "-f",
    "-a", "-ext", "-Lp", "-U", "-alloc_flags", "-jsdl", "-data", "-datagrp",
}  # fmt: skip
_BSUB_FLAGS = {"-H", "-K", "-N", "-B", "-r", "-rn", "-x", "-ti", "-hl", "-Zs"}
_BSUB_INTERACTIVE = {"-I", "-Ip", "-Is", "-IS", "-ISp", "-ISs", "-IX"}
_REPEATABLE = {"-R", "-f"}


class LsfError(Exception):
    """A command error: printed on stderr, exit status 255."""


# --- state ---------------------------------------------------------------------------------


class State:
    """The cluster: config, job records (one JSON file per job or array element), a lock."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.jobs_dir = self.root / "jobs"
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        (self.root / "jobfiles").mkdir(exist_ok=True)
        (self.root / "mail").mkdir(exist_ok=True)
        self.config = dict(DEFAULT_CONFIG)
        with contextlib.suppress(FileNotFoundError):
            self.config.update(json.loads((self.root / "cluster.json").read_text()))

    @classmethod
    def from_env(cls, command: str) -> State:
        root = os.environ.get(STATE_ENV)
        if not root:
            raise LsfError(
                f"{command}: LSF is down (the stand-in needs ${STATE_ENV}, its cluster "
                "state directory). Please wait ..."
            )
        return cls(root)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        with open(self.root / "lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def path(self, key: str) -> Path:
        return self.jobs_dir / f"{key}.json"

    def load(self, key: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.path(key).read_text())
        return data

    def save(self, job: dict[str, Any]) -> None:
        target = self.path(job["key"])
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(job))
        os.replace(tmp, target)

    def update(self, key: str, change: Callable[[dict[str, Any]], bool | None]) -> dict[str, Any]:
        """Read-modify-write of one job under the lock; ``change`` returns False to skip."""
        with self.lock():
            job = self.load(key)
            if change(job) is not False:
                self.save(job)
            return job

    def all_jobs(self) -> list[dict[str, Any]]:
        jobs = []
        for path in self.jobs_dir.glob("*.json"):
            with contextlib.suppress(FileNotFoundError, ValueError):
                jobs.append(json.loads(path.read_text()))
        jobs.sort(key=lambda j: (j["id"], j["index"]))
        return jobs

    def next_id(self) -> int:
        counter = self.root / "next_id"
        value = int(counter.read_text()) if counter.exists() else 100
        counter.write_text(str(value + 1))
        return value


def force_stat(root: str | os.PathLike[str], job_id: int, stat: str | None) -> None:
    """Test hook: shows job ``job_id`` in ``stat`` (None: its real state) until it finishes.

    The job's processes are not touched: this emulates what only the cluster can cause, e.g.
    SSUSP (suspended by load), UNKWN (host unreachable), ZOMBI.
    """
    state = State(root)
    for job in state.all_jobs():
        if job["id"] == job_id:

            def change(j: dict[str, Any]) -> None:
                j["forced_stat"] = stat

            state.update(job["key"], change)


def shown_stat(job: dict[str, Any]) -> str:
    """The status bjobs shows: a forced one, UNKWN when the runner of a started job died."""
    if job.get("forced_stat") and job["stat"] not in FINISHED:
        return str(job["forced_stat"])
    if job["stat"] in ("RUN", "USUSP", "SSUSP") and not process_alive(
        job.get("runner_pid"), job.get("runner_start")
    ):
        return "UNKWN"
    return str(job["stat"])


def process_start(pid: int) -> str | None:
    """The start time (in clock ticks since boot) of ``pid``; None if it is not running."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    if fields[0] == "Z":
        return None
    return fields[19]


def process_alive(pid: int | None, start: str | None) -> bool:
    return bool(pid) and process_start(int(pid or 0)) == start


def lsf_time(ts: float | None) -> str:
    return time.strftime("%b %e %H:%M", time.localtime(ts)) if ts else ""


# --- bsub ----------------------------------------------------------------------------------


def parse_bsub_options(argv: list[str], opts: dict[str, Any]) -> list[str]:
    """Parses bsub options into ``opts`` (later values win); returns the command words."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-") or arg == "-":
            return argv[i:]
        if arg in _BSUB_INTERACTIVE:
            raise LsfError(f"bsub: {arg}: interactive jobs are not supported by this stand-in")
        if arg in ("-h", "-help"):
            raise LsfError(usage())
        if arg in _BSUB_FLAGS:
            opts[arg] = True
            i += 1
            continue
        if arg not in _BSUB_VALUE:
            raise LsfError(f"bsub: illegal option -- {arg.lstrip('-')}\n{usage()}")
        if i + 1 >= len(argv):
            raise LsfError(f"bsub: option requires an argument -- {arg.lstrip('-')}\n{usage()}")
        value = argv[i + 1]
        if arg in _REPEATABLE:
            opts.setdefault(arg, []).append(value)
        else:
            opts[arg] = value
        i += 2
    return []


def usage() -> str:
    return (
        "Usage: bsub [-h] [-V] [-H] [-x] [-r] [-N] [-B] [-K] [-J job_name] [-Jd description] "
        "[-q queue_name] [-P project_name] [-n min[,max]] [-R res_req] [-gpu gpu_req] "
        "[-o out_file | -oo out_file] [-e err_file | -eo err_file] [-cwd dir] [-env vars] "
        "[-w dependency] [-W limit] [-M limit] [-m hosts] [command [argument ...]]"
    )


def _find_close(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "[":
            depth += 1
        elif text[i] == "]":
            depth -= 1
            if depth == 0:
                return i
    return -1


def parse_res_req(text: str, unit: str) -> dict[str, Any]:
    """Validates a -R string; returns what the stand-in uses: memory (MB), span hosts."""
    bad = LsfError("Bad resource requirement syntax. Job not submitted.")
    s = text.strip()
    if not s or s.count("[") != s.count("]"):
        raise bad
    result: dict[str, Any] = {"mem_mb": None, "span_hosts": None, "mem_per": "job"}
    if not _SECTION.match(s):
        if "[" in s:
            raise bad
        return result  # a plain select string, e.g. "type==any"
    seen: set[str] = set()
    pos = 0
    while pos < len(s):
        m = _SECTION.match(s, pos)
        if m is None:
            if s[pos:].strip():
                raise bad
            break
        name = m.group(1)
        close = _find_close(s, m.end() - 1)
        if close < 0 or (name in seen and name != "rusage"):
            raise bad
        seen.add(name)
        body = s[m.end() : close].strip()
        if not body:
            raise bad
        if name == "rusage":
            _parse_rusage(body, unit, result, bad)
        elif name == "span":
            _parse_span(body, result, bad)
        pos = close + 1
        rest = s[pos:].lstrip()
        if rest.startswith("||"):  # alternative rusage sections: rusage[...] || rusage[...]
            if name != "rusage" or not rest[2:].lstrip().startswith("rusage"):
                raise bad
            pos = len(s) - len(rest) + 2
        elif pos < len(s) and not s[pos].isspace():
            raise bad
    return result


def _parse_rusage(body: str, unit: str, result: dict[str, Any], bad: LsfError) -> None:
    for alternative in body.split("||"):
        for usage_string in alternative.split(","):
            parts = [p.strip() for p in usage_string.split(":")]
            for part in parts:
                key, sep, value = part.partition("=")
                key = key.strip()
                value = value.strip()
                if not sep or not _RES_NAME.match(key) or not value:
                    raise bad
                if key == "duration":
                    if not re.match(r"^\d+[hms]?$", value):
                        raise bad
                elif key == "decay":
                    if value not in ("0", "1"):
                        raise bad
                elif key in ("mem", "swp", "swap", "tmp"):
                    m = _MEM.match(value)
                    if m is None:
                        raise bad
                    if key == "mem" and result["mem_mb"] is None:
                        suffix = (m.group(2) or unit)[0].upper()
                        result["mem_mb"] = float(m.group(1)) * _UNITS_MB[suffix]
                        result["mem_per"] = m.group(3) or "job"
                elif not _NUMBER.match(value):
                    raise bad


def _parse_span(body: str, result: dict[str, Any], bad: LsfError) -> None:
    for part in body.split(":"):
        key, sep, value = part.strip().partition("=")
        if not sep:
            raise bad
        if key == "hosts":
            if not re.match(r"^(-1|[1-9]\d*)$", value):
                raise bad
            result["span_hosts"] = int(value)
        elif key == "ptile":
            if not re.match(r"^([1-9]\d*|!|'!')$", value):
                raise bad
        elif key == "block":
            if not re.match(r"^[1-9]\d*$", value):
                raise bad
        else:
            raise bad


def parse_gpu(text: str) -> int:
    """Validates a -gpu string; returns the number of GPUs per host."""
    if text == "-":
        return 1
    bad = LsfError("Bad GPU requirement syntax. Job not submitted.")
    num = 1
    for part in text.split(":"):
        key, sep, value = part.strip().partition("=")
        pattern = _GPU_KEYS.get(key)
        if not sep or pattern is None or not pattern.match(value):
            raise bad
        if key == "num":
            num = int(value.split("/")[0])
    return num


def parse_slots(text: str) -> int:
    m = re.match(r"^([1-9]\d*)(?:,([1-9]\d*))?$", text)
    if m is None or (m.group(2) and int(m.group(2)) < int(m.group(1))):
        raise LsfError(f"{text}: Bad argument for option -n. Job not submitted.")
    return int(m.group(1))


def parse_env(text: str, environ: dict[str, str]) -> dict[str, str]:
    """Applies ``-env "none" | "all, [~var, ...] [var=value, ...]" | "var[=value], ..."``."""
    bad = LsfError("Bad -env syntax. Job not submitted.")
    if len(text) > 4094:
        raise bad
    items = _split_env(text, bad)
    if not items:
        raise bad
    if items == ["none"]:
        return {}
    if items[0] == "all":
        env = dict(environ)
        items = items[1:]
    else:
        env = {}
    for item in items:
        name, sep, value = item.partition("=")
        if item.startswith("~"):
            if sep:
                raise bad
            env.pop(item[1:], None)
            continue
        if not name or name in ("none", "all") or any(c in name for c in ",~\"'"):
            raise bad
        if len(value) >= 2 and value[0] == value[-1] == "'":
            value = value[1:-1]
        if sep:
            env[name] = value
        elif name in environ:
            env[name] = environ[name]
    return env


def _split_env(text: str, bad: LsfError) -> list[str]:
    items: list[str] = []
    current = ""
    quoted = False
    for ch in text:
        if ch == "'":
            quoted = not quoted
        if ch == "," and not quoted:
            items.append(current.strip())
            current = ""
        else:
            current += ch
    if quoted:
        raise bad
    items.append(current.strip())
    if any(not item for item in items):
        raise bad
    return items


def parse_array(name: str, max_size: int = 1000) -> tuple[str, list[int] | None, int | None]:
    """Splits ``name[1-4,7:2]%2`` into base name, indices and slot limit (non-arrays: None).

    As LSF: the array name is letters, digits, ``.``, ``-`` and ``_``; the whole
    specification at most 255 characters; indices 1..MAX_JOB_ARRAY_SIZE; the limit >= 1.
    """
    if len(name) > 4094 or not name:
        raise LsfError("Bad job name. Job not submitted.")
    if "[" not in name and "]" not in name:
        return name, None, None
    m = _ARRAY.match(name)
    if m is None or len(name) > 255 or not re.match(r"^[A-Za-z0-9._-]+$", m.group("base")):
        raise LsfError("Bad job name. Job not submitted.")
    if m.group("limit") is not None and int(m.group("limit")) < 1:
        raise LsfError("Bad job array slot limit. Job not submitted.")
    indices: list[int] = []
    for part in m.group("spec").split(","):
        r = re.match(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$", part.strip())
        if r is None:
            raise LsfError(f"{part}: Bad job array index list. Job not submitted.")
        start = int(r.group(1))
        end = int(r.group(2) or start)
        step = int(r.group(3) or 1)
        if start < 1 or end < start or step < 1:
            raise LsfError(f"{part}: Bad job array index list. Job not submitted.")
        if end > max_size:
            raise LsfError(
                f"{part}: The job array index exceeds MAX_JOB_ARRAY_SIZE ({max_size}). "
                "Job not submitted."
            )
        indices.extend(range(start, end + 1, step))
    limit = int(m.group("limit")) if m.group("limit") else None
    return m.group("base"), sorted(set(indices)), limit


class _Dep:
    """Parses and evaluates a -w dependency expression."""

    KEYWORDS = ("done", "ended", "exit", "started", "post_done", "post_err")
    TOKEN = re.compile(r'\s*(&&|\|\||!|\(|\)|,|"[^"]*"|[^\s()&|!,"]+)')

    def __init__(self, text: str, state: State) -> None:
        self.state = state
        self.tokens = self._tokenize(text)
        self.pos = 0
        self.refs: list[str] = []
        if not self.tokens:
            raise self.bad()
        self.tree = self._or()
        if self.pos != len(self.tokens):
            raise self.bad()

    @staticmethod
    def bad() -> LsfError:
        return LsfError("Dependency condition syntax error. Job not submitted.")

    def _tokenize(self, text: str) -> list[str]:
        tokens: list[str] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = self.TOKEN.match(text, pos)
            if m is None:
                raise self.bad()
            tokens.append(m.group(1))
            pos = m.end()
        return tokens

    def _peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _take(self, expected: str | None = None) -> str:
        tok = self._peek()
        if tok is None or (expected is not None and tok != expected):
            raise self.bad()
        self.pos += 1
        return tok

    def _or(self) -> Any:
        node = self._and()
        while self._peek() == "||":
            self._take()
            node = ("or", node, self._and())
        return node

    def _and(self) -> Any:
        node = self._not()
        while self._peek() == "&&":
            self._take()
            node = ("and", node, self._not())
        return node

    def _not(self) -> Any:
        if self._peek() == "!":
            self._take()
            return ("not", self._not())
        if self._peek() == "(":
            self._take()
            node = self._or()
            self._take(")")
            return node
        tok = self._take()
        if tok in self.KEYWORDS and self._peek() == "(":
            self._take("(")
            ref = self._ref(self._take())
            if tok == "exit" and self._peek() == ",":
                self._take()
                while self._peek() not in (")", None):
                    self._take()  # exit code comparison: accepted, compared loosely below
            self._take(")")
            return ("cond", tok, ref)
        return ("cond", "done", self._ref(tok))

    def _ref(self, tok: str) -> str:
        ref = tok[1:-1] if tok.startswith('"') else tok
        if not ref or ref in ("&&", "||", "!", "(", ")", ","):
            raise self.bad()
        if not self._jobs(ref):
            raise LsfError(f"{ref}: No matching job found. Job not submitted.")
        self.refs.append(ref)
        return ref

    def _jobs(self, ref: str) -> list[dict[str, Any]]:
        m = _JOBREF.match(ref)
        jobs = self.state.all_jobs()
        if m is not None:
            return [
                j
                for j in jobs
                if j["id"] == int(m.group("id"))
                and (m.group("index") is None or j["index"] == int(m.group("index")))
            ]
        return [j for j in jobs if name_matches(ref, j)]

    def satisfied(self) -> bool:
        return bool(self._eval(self.tree))

    def _eval(self, node: Any) -> bool:
        kind = node[0]
        if kind == "or":
            return self._eval(node[1]) or self._eval(node[2])
        if kind == "and":
            return self._eval(node[1]) and self._eval(node[2])
        if kind == "not":
            return not self._eval(node[1])
        _, cond, ref = node
        stats = [shown_stat(j) for j in self._jobs(ref)]
        if not stats:
            return False
        if cond in ("done", "post_done"):
            return all(s == "DONE" for s in stats)
        if cond in ("exit", "post_err"):
            return all(s == "EXIT" for s in stats)
        if cond == "ended":
            return all(s in FINISHED for s in stats)
        return all(s in STARTED for s in stats)  # started


def name_matches(pattern: str, job: dict[str, Any]) -> bool:
    """LSF job name matching: ``*`` is a wildcard; an array matches by its base name."""
    regex = re.compile("^" + ".*".join(re.escape(p) for p in pattern.split("*")) + "$", re.S)
    return bool(regex.match(job["name"]) or regex.match(job["display_name"]))


def read_script(opts: dict[str, Any]) -> str:
    """The job script from stdin; its leading ``#BSUB`` lines become options."""
    if sys.stdin is None or sys.stdin.isatty():
        return ""
    script = sys.stdin.read()
    directives: list[str] = []
    for line in script.splitlines():
        stripped = line.strip()
        if stripped.startswith("#BSUB"):
            directives.extend(shlex.split(stripped[len("#BSUB") :]))
        elif stripped and not stripped.startswith("#"):
            break
    if directives:
        from_script: dict[str, Any] = {}
        parse_bsub_options(directives, from_script)
        for key, value in from_script.items():
            opts.setdefault(key, value)  # the command line wins
    return script


def bsub(state: State, argv: list[str]) -> int:
    if argv == ["-V"]:
        print("IBM Spectrum LSF 10.1.0.0 (anylaunch stand-in)", file=sys.stderr)
        return 0
    opts: dict[str, Any] = {}
    words = parse_bsub_options(argv, opts)
    command = " ".join(words) if words else read_script(opts)
    if not any(line.strip() and not line.strip().startswith("#") for line in command.splitlines()):
        raise LsfError("No command is specified. Job not submitted.")

    config = state.config
    queue = opts.get("-q") or config["default_queue"]
    if queue not in config["queues"]:
        raise LsfError(f"{queue}: No such queue. Job not submitted.")
    slots = parse_slots(opts["-n"]) if "-n" in opts else 1
    res = {"mem_mb": None, "span_hosts": None, "mem_per": "job"}
    for text in opts.get("-R", []):
        parsed = parse_res_req(text, config["unit_for_limits"])
        res.update({k: v for k, v in parsed.items() if v is not None})
    gpus = parse_gpu(opts["-gpu"]) if "-gpu" in opts else 0
    environ = dict(os.environ)
    env = parse_env(opts["-env"], environ) if "-env" in opts else environ
    env.pop(STATE_ENV, None)  # the job must not see the cluster's internals
    for key in ("-P", "-Jd", "-cwd", "-o", "-oo", "-e", "-eo", "-G", "-g"):
        if key in opts and (not opts[key] or "\n" in opts[key] or len(opts[key]) > 4094):
            raise LsfError(f"Bad argument for option {key}. Job not submitted.")
    if ("-o" in opts and "-oo" in opts) or ("-e" in opts and "-eo" in opts):
        raise LsfError("-o/-oo and -e/-eo cannot be used together. Job not submitted.")

    name = opts.get("-J") or command.strip().splitlines()[0][:4094]
    base, indices, limit = (
        parse_array(opts["-J"], int(config["max_job_array_size"]))
        if "-J" in opts
        else (name, None, None)
    )

    with state.lock():
        pend_limit = config["max_pend_jobs"]
        if pend_limit is not None:
            pending = [
                j
                for j in state.all_jobs()
                if j["user"] == getpass.getuser() and j["stat"] == "PEND"
            ]
            if len(pending) + len(indices or [0]) > int(pend_limit):
                raise LsfError("Pending job threshold reached. Job not submitted.")
        dependency = opts.get("-w")
        if dependency is not None:
            _Dep(dependency, state)  # validates syntax and that referenced jobs exist
        job_id = state.next_id()
        now = time.time()
        keys: list[str] = []
        for index in indices or [0]:

            def expand(path: str | None, index: int = index) -> str | None:
                if path is None:
                    return None
                return path.replace("%J", str(job_id)).replace("%I", str(index))

            out_path = opts.get("-o") or opts.get("-oo")
            err_path = opts.get("-e") or opts.get("-eo")
            job = {
                "key": f"{job_id}.{index}",
                "id": job_id,
                "index": index,
                "name": base,
                "display_name": f"{base}[{index}]" if indices else base,
                "array_limit": limit,
                "description": opts.get("-Jd", ""),
                "queue": queue,
                "project": opts.get("-P", "default"),
                "user": getpass.getuser(),
                "from_host": socket.gethostname(),
                "sub_cwd": os.getcwd(),
                "cwd": expand(opts.get("-cwd")),
                "command": command,
                "slots": slots,
                "mem_mb": res["mem_mb"] * (slots if res["mem_per"] == "task" else 1)
                if res["mem_mb"] is not None
                else None,
                "span_hosts": res["span_hosts"],
                "gpus": gpus,
                "env": env,
                "dependency": dependency,
                "output_file": expand(out_path),
                "output_overwrite": "-oo" in opts,
                "error_file": expand(err_path),
                "error_overwrite": "-eo" in opts,
                "submit_time": now,
                "start_time": None,
                "finish_time": None,
                "stat": "PSUSP" if opts.get("-H") else "PEND",
                "pend_reason": "The job was suspended by the user while pending"
                if opts.get("-H")
                else "New job is waiting for scheduling",
                "exit_code": "",
                "exit_reason": "",
                "exec_host": "",
                "forced_stat": None,
                "runner_pid": None,
                "runner_start": None,
                "job_pgid": None,
                "kill": None,
                "signals": [],
            }
            state.save(job)
            keys.append(str(job["key"]))
    for key in keys:
        start_runner(state, key)
    where = "queue" if "-q" in opts else "default queue"
    print(f"Job <{job_id}> is submitted to {where} <{queue}>.")
    sys.stdout.flush()
    if opts.get("-K"):
        return wait_for(state, keys)
    return 0


# the runner imports this module (its compiled form is cached) rather than running it as a script
_RUNNER = (
    "import sys; sys.dont_write_bytecode = False; sys.path.insert(0, sys.argv.pop(1)); "
    "import lsf_standin; "
    "lsf_standin.run_job(sys.argv[1], sys.argv[2])"
)


def start_runner(state: State, key: str) -> None:
    log = open(state.root / "runner.log", "ab")  # noqa: SIM115 (handed to the runner)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-S", "-E", "-c", _RUNNER, HERE, str(state.root), key],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            cwd="/",
        )
    finally:
        log.close()
    start = process_start(proc.pid)

    def record(job: dict[str, Any]) -> None:
        job["runner_pid"] = proc.pid
        job["runner_start"] = start

    state.update(key, record)


def wait_for(state: State, keys: list[str]) -> int:
    print("<<Waiting for dispatch ...>>")
    code = 0
    for key in keys:
        while state.load(key)["stat"] not in FINISHED:
            time.sleep(POLL_S)
        job = state.load(key)
        if job["stat"] == "EXIT":
            code = int(job["exit_code"] or 1)
    print("<<Job is finished>>")
    return code


# --- the runner (sbatchd of one job) -------------------------------------------------------


def pend_reason(state: State, job: dict[str, Any]) -> str | None:
    """Why the job cannot be dispatched now (None: it can)."""
    if job["stat"] == "PSUSP":
        return "The job was suspended by the user while pending"
    if time.time() - job["submit_time"] < float(state.config["dispatch_delay_s"]):
        return "New job is waiting for scheduling"
    hosts = state.config["hosts"]
    fits = [
        h
        for h in hosts
        if (job["slots"] <= h["ncpus"] or job["span_hosts"] != 1)
        and (job["mem_mb"] is None or job["mem_mb"] <= h["maxmem_mb"])
        and job["gpus"] <= h.get("ngpus", 0)
    ]
    if not fits:
        return "Job's requirements for resource reservation not satisfied"
    if job["dependency"] and not _Dep(job["dependency"], state).satisfied():
        return "Job dependency condition not satisfied"
    limit = job.get("array_limit")
    if limit and _running_elements(state, job) >= limit:
        return "The job array has reached its job slot limit"
    return None


def _running_elements(state: State, job: dict[str, Any]) -> int:
    """How many elements of ``job``'s array hold a slot (running or suspended)."""
    return sum(
        1
        for j in state.all_jobs()
        if j["id"] == job["id"] and j["stat"] in ("RUN", "USUSP", "SSUSP")
    )


def job_environment(state: State, job: dict[str, Any], host: str) -> dict[str, str]:
    env = dict(job["env"])
    env.update(
        LSB_JOBID=str(job["id"]),
        LSB_JOBINDEX=str(job["index"]),
        LSB_JOBNAME=job["display_name"],
        LSB_QUEUE=job["queue"],
        LSB_HOSTS=" ".join([host] * job["slots"]),
        LSB_MCPU_HOSTS=f"{host} {job['slots']}",
        LSB_DJOB_NUMPROC=str(job["slots"]),
        LSB_SUB_HOST=job["from_host"],
        LS_SUBCWD=job["sub_cwd"],
        LSF_ENVDIR=str(state.root),
    )
    if job["gpus"]:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(job["gpus"]))
    return env


def open_output(path: str | None, overwrite: bool) -> Any:
    if path is None:
        return None
    try:
        return open(path, "wb" if overwrite else "ab")
    except OSError:
        return None  # LSF mails the output when it cannot write the file


def run_job(root: str, key: str) -> None:
    state = State(root)
    terminate_after = float(state.config["job_terminate_interval_s"])
    host = state.config["hosts"][0]["name"]
    # --- PEND
    while True:
        job = state.load(key)
        if job["stat"] in FINISHED:
            return  # killed while pending
        reason = pend_reason(state, job)
        if reason is None:

            def dispatch(j: dict[str, Any]) -> bool:
                if j["stat"] != "PEND":
                    return False  # killed or held meanwhile
                if j.get("array_limit") and _running_elements(state, j) >= j["array_limit"]:
                    return False  # another element took the last slot (checked under the lock)
                j.update(stat="RUN", start_time=time.time(), pend_reason="")
                j["exec_host"] = ":".join([host] * j["slots"])
                return True

            job = state.update(key, dispatch)
            if job["stat"] == "RUN":
                break
            continue
        if reason != job["pend_reason"]:

            def note(j: dict[str, Any], reason: str = reason) -> None:
                j["pend_reason"] = reason

            state.update(key, note)
        time.sleep(POLL_S)
    # --- RUN
    jobfile = state.root / "jobfiles" / f"{key}.sh"
    jobfile.write_text(job["command"] + "\n")
    cwd = job["cwd"] or job["sub_cwd"]
    if not os.path.isdir(cwd):
        cwd = os.environ.get("HOME", "/tmp")  # LSF falls back to the home directory
    mail = state.root / "mail" / f"{key}.txt"
    out = open_output(job["output_file"], job["output_overwrite"])
    err = open_output(job["error_file"], job["error_overwrite"]) if job["error_file"] else None
    if out is None:
        out = open(mail, "ab")  # noqa: SIM115
    try:
        proc = subprocess.Popen(
            ["/bin/sh", str(jobfile)],
            cwd=cwd,
            env=job_environment(state, job, host),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err if err is not None else subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as e:
        out.write(f"cannot start the job: {e}\n".encode())
        finish(state, key, 127, killed=False, out=out)
        return

    def started(j: dict[str, Any]) -> None:
        j["job_pgid"] = proc.pid

    state.update(key, started)
    kill_started: float | None = None
    signals_done = 0
    while True:
        try:
            rc = proc.wait(timeout=POLL_S)
            break
        except subprocess.TimeoutExpired:
            pass
        job = state.load(key)
        for signame in job["signals"][signals_done:]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, getattr(signal, signame))
        signals_done = len(job["signals"])
        if job["kill"] and kill_started is None:
            kill_started = time.monotonic()
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
        if job["kill"] == "force" or (
            kill_started is not None and time.monotonic() - kill_started >= terminate_after
        ):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    # LSF ends the whole job: processes the job left behind are killed too
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    code = rc if rc >= 0 else 128 - rc
    finish(state, key, code, killed=bool(state.load(key)["kill"]), out=out)
    if err is not None:
        err.close()


def finish(state: State, key: str, code: int, killed: bool, out: Any) -> None:
    job = state.load(key)
    status = "EXIT" if killed or code != 0 else "DONE"
    now = time.time()
    word = "Exited" if status == "EXIT" else "Done"
    result = (
        "Successfully completed."
        if status == "DONE"
        else (
            f"TERM_OWNER: job killed by owner.\nExited with exit code {code}."
            if killed
            else f"Exited with exit code {code}."
        )
    )
    report = (
        "\n------------------------------------------------------------\n"
        f"Sender: LSF System <lsfadmin@{job['exec_host'].split(':')[0]}>\n"
        f"Subject: Job {job['id']}: <{job['display_name']}> in cluster "
        f"<{state.config['cluster']}> {word}\n\n"
        f"Job <{job['display_name']}> was submitted from host <{job['from_host']}> by user "
        f"<{job['user']}> in cluster <{state.config['cluster']}> at "
        f"{time.ctime(job['submit_time'])}\n"
        f"Job was executed on host(s) <{job['slots']}*{job['exec_host'].split(':')[0]}>, in "
        f"queue <{job['queue']}>, as user <{job['user']}> in cluster "
        f"<{state.config['cluster']}> at {time.ctime(job['start_time'])}\n"
        f"Results reported at {time.ctime(now)}\n\n{result}\n"
    )
    with contextlib.suppress(OSError):
        out.write(report.encode())
        out.close()

    def end(j: dict[str, Any]) -> None:
        j.update(
            stat=status,
            finish_time=now,
            exit_code="" if status == "DONE" else str(code),
            exit_reason="TERM_OWNER: job killed by owner" if killed else "",
            forced_stat=None,
        )

    state.update(key, end)


# --- bjobs ---------------------------------------------------------------------------------


def parse_format(text: str) -> tuple[list[str], str]:
    """Parses ``-o "field[:[-][width]][:unit] ... [delimiter='c']"``."""
    delimiter = " "
    m = re.search(r"""\s*delimiter=(['"])(.*?)\1\s*$""", text)
    if m is not None:
        delimiter = m.group(2)
        text = text[: m.start()]
    fields: list[str] = []
    for token in text.split():
        name = token.split(":")[0].lower()
        if name == "all":
            fields.extend(_FIELDS)
            continue
        name = _ALIASES.get(name, name)
        if name not in _FIELDS:
            raise LsfError(f"{token}: Illegal field name in the output format.")
        fields.append(name)
    if not fields:
        raise LsfError("bjobs: The output format specification is empty.")
    return fields, delimiter


def display_enh(state: State) -> bool:
    """LSB_BJOBS_DISPLAY_ENH: from the environment, else from cluster.json."""
    env = os.environ.get("LSB_BJOBS_DISPLAY_ENH")
    if env is not None:
        return env.strip().upper() == "Y"
    return bool(state.config["bjobs_display_enh"])


def field_value(job: dict[str, Any], name: str, enh: bool = False) -> str:
    stat = shown_stat(job)
    if name == "jobid":
        is_element = job["display_name"] != job["name"]
        return f"{job['id']}[{job['index']}]" if enh and is_element else str(job["id"])
    if name == "jobindex":
        return str(job["index"])
    if name == "job_name":
        return str(job["display_name"])
    if name == "stat":
        return stat
    if name == "proj_name":
        return str(job["project"])
    if name == "job_description":
        return str(job["description"])
    if name in ("submit_time", "start_time", "finish_time"):
        return lsf_time(job[name])
    if name == "exec_host":
        return str(job["exec_host"]) if job["start_time"] else ""
    if name == "pend_reason":
        return str(job["pend_reason"]) if stat in ("PEND", "PSUSP") else ""
    if name == "exec_cwd":
        return str(job["cwd"] or job["sub_cwd"]) if job["start_time"] else ""
    if name == "nreq_slot":
        return str(job["slots"])
    if name == "nalloc_slot":
        return str(job["slots"]) if stat in ("RUN", "USUSP", "SSUSP") else "0"
    if name == "pids":
        return str(job["job_pgid"] or "") if stat == "RUN" else ""
    if name in ("output_file", "error_file"):
        return str(job[name] or "")
    return str(job.get(name) or "")


def bjobs(state: State, argv: list[str]) -> int:
    flags: set[str] = set()
    values: dict[str, str] = {}
    refs: list[str] = []
    takes_value = {"-u", "-q", "-P", "-J", "-Jd", "-o", "-m", "-g", "-G", "-app", "-sla"}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-a", "-d", "-p", "-r", "-s", "-json", "-noheader", "-w", "-W", "-x", "-A"):
            flags.add(arg)
        elif arg in takes_value:
            if i + 1 >= len(argv):
                raise LsfError(f"bjobs: option requires an argument -- {arg.lstrip('-')}")
            values[arg] = argv[i + 1]
            i += 1
        elif arg.startswith("-"):
            raise LsfError(f"bjobs: illegal option -- {arg.lstrip('-')}")
        else:
            refs.append(arg)
        i += 1
    if "-json" in flags and "-noheader" in flags:
        raise LsfError("bjobs: The -json and -noheader options cannot be used together.")
    fields, delimiter = parse_format(values["-o"]) if "-o" in values else ([], " ")
    as_json = "-json" in flags and bool(fields)
    enh = display_enh(state)

    jobs = state.all_jobs()
    errors: list[tuple[str, str]] = []
    if refs:
        selected: list[dict[str, Any]] = []
        for ref in refs:
            m = _JOBREF.match(ref)
            if m is None:
                errors.append((ref, f"{ref}: Illegal job ID."))
                continue
            found = [
                j
                for j in jobs
                if j["id"] == int(m.group("id"))
                and (m.group("index") is None or j["index"] == int(m.group("index")))
            ]
            if not found:
                errors.append((ref, f"Job <{ref}> is not found"))
            selected.extend(found)
        jobs = selected
    elif "-a" in flags:
        pass
    elif "-d" in flags:
        jobs = [j for j in jobs if shown_stat(j) in FINISHED]
    else:
        jobs = [j for j in jobs if shown_stat(j) not in FINISHED]
    if "-p" in flags:
        jobs = [j for j in jobs if shown_stat(j) in ("PEND", "PSUSP")]
    if "-r" in flags:
        jobs = [j for j in jobs if shown_stat(j) == "RUN"]
    if "-s" in flags:
        jobs = [j for j in jobs if shown_stat(j) in SUSPENDED]
    user = values.get("-u", getpass.getuser())
    if user != "all":
        jobs = [j for j in jobs if j["user"] == user]
    if "-q" in values:
        jobs = [j for j in jobs if j["queue"] == values["-q"]]
    if "-P" in values:
        jobs = [j for j in jobs if j["project"] == values["-P"]]
    if "-J" in values:
        jobs = [j for j in jobs if name_matches(values["-J"], j)]
    if "-Jd" in values:
        pattern = values["-Jd"]
        regex = re.compile("^" + ".*".join(re.escape(p) for p in pattern.split("*")) + "$", re.S)
        jobs = [j for j in jobs if regex.match(j["description"])]

    if as_json:
        records: list[dict[str, str]] = [
            {_FIELDS[f]: field_value(j, f, enh) for f in fields} for j in jobs
        ]
        records += [{"JOBID": ref, "ERROR": message} for ref, message in errors]
        if not records and state.config["json_when_empty"] == "message" and not refs:
            print("No job found" if "-a" in flags else "No unfinished job found", file=sys.stderr)
            return FAIL
        print(json.dumps({"COMMAND": "bjobs", "JOBS": len(records), "RECORDS": records}, indent=2))
        return FAIL if errors else 0
    for _, message in errors:
        print(message, file=sys.stderr)
    if not jobs:
        if not errors:
            print("No job found" if "-a" in flags else "No unfinished job found", file=sys.stderr)
        return FAIL
    if not fields:
        fields = [
            "jobid",
            "user",
            "stat",
            "queue",
            "from_host",
            "exec_host",
            "job_name",
            "submit_time",
        ]
        delimiter = "  "
    if "-noheader" not in flags:
        print(delimiter.join(_FIELDS[f] for f in fields))
    for j in jobs:
        print(delimiter.join(field_value(j, f, enh) or "-" for f in fields))
    return FAIL if errors else 0


# --- bkill ---------------------------------------------------------------------------------


def bkill(state: State, argv: list[str]) -> int:
    values: dict[str, str] = {}
    force = False
    refs: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-s", "-J", "-q", "-u", "-C", "-m", "-g", "-sla", "-app", "-stat"):
            if i + 1 >= len(argv):
                raise LsfError(f"bkill: option requires an argument -- {arg.lstrip('-')}")
            values[arg] = argv[i + 1]
            i += 1
        elif arg in ("-r", "-d", "-b", "-l"):
            force = force or arg == "-r"
            if arg == "-l":
                print(" ".join(s.name[3:] for s in signal.Signals))
                return 0
        elif arg.startswith("-"):
            raise LsfError(f"bkill: illegal option -- {arg.lstrip('-')}")
        else:
            refs.append(arg)
        i += 1
    signame: str | None = None
    if "-s" in values:
        raw = values["-s"].upper().removeprefix("SIG")
        if raw.isdigit():
            try:
                signame = signal.Signals(int(raw)).name
            except ValueError:
                signame = None
        else:
            signame = f"SIG{raw}" if hasattr(signal, f"SIG{raw}") else None
        if signame is None:
            raise LsfError(f"bkill: {values['-s']}: Illegal signal value")
    if not refs and not any(k in values for k in ("-J", "-q", "-u")):
        raise LsfError(
            "bkill: Job ID or one of '-m', '-u', '-J', '-g', '-q', '-sla', '-app' and "
            "'-stat' must be specified"
        )
    jobs = [j for j in state.all_jobs() if j["user"] == getpass.getuser()]
    targets: list[tuple[str, list[dict[str, Any]]]] = []
    status = 0
    if refs:
        for ref in refs:
            if ref == "0":
                targets.append((ref, [j for j in jobs if j["stat"] not in FINISHED]))
                continue
            m = _JOBREF.match(ref)
            if m is None:
                print(f"{ref}: Illegal job ID.", file=sys.stderr)
                status = FAIL
                continue
            found = [
                j
                for j in jobs
                if j["id"] == int(m.group("id"))
                and (m.group("index") is None or j["index"] == int(m.group("index")))
            ]
            targets.append((ref, found))
    else:
        targets.append(("", [j for j in jobs if j["stat"] not in FINISHED]))

    def selected(job: dict[str, Any]) -> bool:
        if "-J" in values and not name_matches(values["-J"], job):
            return False
        return "-q" not in values or job["queue"] == values["-q"]

    targets = [(ref, [j for j in found if selected(j)]) for ref, found in targets]
    for ref, found in targets:
        if not found:
            print(
                f"Job <{ref}>: No matching job found" if ref else "No matching job found",
                file=sys.stderr,
            )
            status = FAIL
            continue
        live = [j for j in found if j["stat"] not in FINISHED]
        if not live:
            print(f"Job <{ref}>: Job has already finished", file=sys.stderr)
            status = FAIL
            continue
        for job in live:
            if signame is not None:
                state.update(job["key"], lambda j, s=signame: j["signals"].append(s))
                print(f"Job <{job_label(job)}> is being signaled")
            else:
                kill_one(state, job, force)
                print(f"Job <{job_label(job)}> is being terminated")
    return status


def job_label(job: dict[str, Any]) -> str:
    return f"{job['id']}[{job['index']}]" if job["display_name"] != job["name"] else str(job["id"])


def kill_one(state: State, job: dict[str, Any], force: bool) -> None:
    def change(j: dict[str, Any]) -> None:
        if j["stat"] in FINISHED:
            return
        if j["stat"] in ("PEND", "PSUSP"):
            j.update(
                stat="EXIT",
                finish_time=time.time(),
                exit_code="",
                exit_reason="TERM_OWNER: job killed by owner",
                pend_reason="",
            )
            return
        j["kill"] = "force" if force else (j["kill"] or "term")

    state.update(job["key"], change)


# --- entry points --------------------------------------------------------------------------


def bhosts(state: State, argv: list[str]) -> int:
    """``bhosts``: in lsf_hosts.py (imported when run, it imports this module)."""
    from lsf_hosts import bhosts as run_bhosts

    return run_bhosts(state, argv)


COMMANDS: dict[str, Callable[[State, list[str]], int]] = {
    "bsub": bsub,
    "bjobs": bjobs,
    "bkill": bkill,
    "bhosts": bhosts,
}


def main(command: str, argv: list[str]) -> int:
    """Runs one stand-in command; errors go to stderr with exit status 255."""
    try:
        state = State.from_env(command)
        with open(state.root / "commands.log", "a") as f:  # what the tests ran, one per line
            f.write(json.dumps([command, *argv]) + "\n")
        return COMMANDS[command](state, argv)
    except LsfError as e:
        print(e, file=sys.stderr)
        return FAIL


if __name__ == "__main__":  # e.g. python3 lsf_standin.py bjobs -a
    sys.exit(main(sys.argv[1], sys.argv[2:]))
