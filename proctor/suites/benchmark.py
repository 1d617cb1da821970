"""The task's benchmark (the optional ``performance`` component): run, measure, parse.

The command runs in the sandbox after the tests, from the patched repo, through the
harness wrapper ``incontainer/run_bench.py``, ``repeat`` times; the median measurement is
scored with the lower-is-better target rule (:func:`proctor.rewards.components.target_score`).

Metrics: ``wall_s`` (seconds, measured by the wrapper around the command) and
``max_rss_mib`` (peak RSS of the command, MiB, from ``getrusage``) are measured by the
harness; any other name is read from the command's output, the last line of the form
``NAME=VALUE`` or ``NAME: VALUE``. A printed metric comes from a process that imports the
patched code, so it is only as trustworthy as the benchmark script's own checks; prefer the
harness-measured metrics for RL.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from dataclasses import dataclass, field

from proctor.record import Evidence
from proctor.rewards import target_score
from proctor.sandbox import HARNESS_DIR, PYTHON, Sandbox
from proctor.suites.pytest_runner import RUNNER_FLAGS
from proctor.task import BenchmarkConfig

HARNESS_METRICS = ("wall_s", "max_rss_mib")
_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"


@dataclass
class BenchmarkResult:
    """``score`` in 0..1, or None with ``degraded=True`` when no metric could be read (the
    component is then re-shared). ``measured``: one value per run, in the metric's unit."""

    score: float | None
    measured: list[float] = field(default_factory=list)
    note: str = ""
    degraded: bool = False
    evidence: Evidence = field(default_factory=Evidence)
    #: ``timeout`` (the runs' whole time) ran out before every run was done: the last run
    #: was cut short by it (not by ``cfg.timeout_s``), or no time was left for the next.
    ran_out: bool = False


def parse_metric(output: str, name: str) -> float | None:
    """The value of the last ``NAME=VALUE`` / ``NAME: VALUE`` line in ``output``, or None."""
    rx = re.compile(rf"^\s*{re.escape(name)}\s*[=:]\s*{_NUMBER}\s*$", re.MULTILINE)
    found = rx.findall(output)
    return float(found[-1]) if found else None


def expand(argv: list[str], *, repo: str, bench_dir: str | None) -> list[str]:
    """Fill ``{python}``, ``{repo}`` and ``{bench}`` in the command's arguments."""
    values = {"python": PYTHON, "repo": repo, "bench": bench_dir or ""}
    return [a.format(**values) for a in argv]


def run_benchmark(sb: Sandbox, cfg: BenchmarkConfig, *, repo: str, bench_dir: str | None,
                  timeout: float, pythonpath: list[str] = ()) -> BenchmarkResult:
    """Run the benchmark ``cfg.repeat`` times and score the median. ``timeout``: seconds
    for all the runs together; each run gets ``cfg.timeout_s`` or what is left of them,
    whichever is less, and none starts with less than a second left. ``pythonpath``:
    absolute directories on the benchmark's ``PYTHONPATH`` after ``repo``.

    Outcomes: a run that times out or exits non-zero scores 0.0 (the patched code failed
    its benchmark: an honest failure of this component); so does running out of
    ``timeout`` (with ``ran_out``); exit 0 without a parsable metric gives ``score=None,
    degraded=True``.

    Raises:
        InfraError (from the sandbox) when the container fails.
    """
    argv = expand(cfg.command, repo=repo, bench_dir=bench_dir)
    wrapper = [PYTHON, *RUNNER_FLAGS, f"{HARNESS_DIR}/run_bench.py", repo, *pythonpath, "--",
               *argv]
    measured: list[float] = []
    runs: list[dict] = []
    total_s, last_output, command = 0.0, "", " ".join(wrapper)
    end = time.monotonic() + timeout
    for i in range(cfg.repeat):
        left = end - time.monotonic()
        if left < 1.0:
            return _failed(f"benchmark ran out of its {round(timeout, 1):g} s after {i} of "
                           f"{cfg.repeat} runs", command, total_s, last_output, runs,
                           ran_out=True)
        given = min(cfg.timeout_s, left)
        res = sb.run(wrapper, timeout=given, cwd=repo)
        total_s += res.duration_s
        command = res.command
        if res.timed_out:
            return _failed(f"benchmark timed out after {round(given, 1):g} s", command, total_s,
                           res.output, runs, ran_out=given < cfg.timeout_s)
        try:
            data = json.loads(res.output.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            return _failed("benchmark wrapper printed no result (killed?)", command, total_s,
                           res.output, runs)
        last_output = data["output"]
        runs.append({k: data[k] for k in ("exit_code", "wall_s", "max_rss_mib")})
        if data["exit_code"] != 0:
            return _failed(f"benchmark command exited {data['exit_code']}", command, total_s,
                           last_output, runs)
        value = data[cfg.metric] if cfg.metric in HARNESS_METRICS else parse_metric(
            last_output, cfg.metric)
        if value is None:
            ev = _evidence(command, total_s, last_output, runs)
            return BenchmarkResult(None, measured, f"benchmark printed no parsable "
                                   f"'{cfg.metric}=<number>' line", True, ev)
        measured.append(float(value))
    median = statistics.median(measured)
    score = target_score(median, cfg.target, cfg.tolerance)
    ev = _evidence(command, total_s, last_output, runs)
    ev.details.update(metric=cfg.metric, median=median, target=cfg.target,
                      tolerance=cfg.tolerance, measured=measured)
    return BenchmarkResult(score, measured, f"{cfg.metric} median {median:.4g} "
                           f"(target {cfg.target:g}, tolerance {cfg.tolerance:g})", False, ev)


def _evidence(command: str, duration: float, output: str, runs: list[dict]) -> Evidence:
    return Evidence(command=command, exit_code=runs[-1]["exit_code"] if runs else None,
                    duration_s=round(duration, 3), output=output[-4000:],
                    details={"runs": runs})


def _failed(why: str, command: str, duration: float, output: str, runs: list[dict],
            ran_out: bool = False) -> BenchmarkResult:
    return BenchmarkResult(0.0, [], why, False, _evidence(command, duration, output, runs),
                           ran_out=ran_out)
