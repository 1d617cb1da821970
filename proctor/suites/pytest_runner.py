"""Run one test suite in a sandbox the way DESIGN section 5 asks, and read its report.

The harness owns the invocation: the image's isolated interpreter (``python -I -B``),
Proctor's ini via ``-c``, an explicit ``--rootdir``, plugin autoload off with our plugins
named by ``-p``, the cache provider off, a per-test timeout (pytest-timeout) inside an
outer ``timeout -k`` for the suite. Verdicts come from the JSONL report our plugin writes
under ``/proctor/out`` (outside the repo), never from stdout.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from proctor.sandbox.base import Sandbox

INCONTAINER = Path(__file__).parent / "incontainer"
HARNESS_DIR = "/proctor/harness"
OUT_DIR = "/proctor/out"
PYTHON = "/opt/proctor/venv/bin/python"
#: pytest exit statuses that mean "the session ran to its end" (0 all passed, 1 some failed).
COMPLETED_EXIT = (0, 1)


@dataclass
class SuiteRun:
    """One run of one suite. ``outcomes`` maps test id -> outcome (see proctor_report)."""

    suite: str
    outcomes: dict[str, str]
    command: str
    exit_code: int
    duration_s: float
    output: str
    collected: int | None = None
    session_finished: bool = False
    timed_out: bool = False
    collection_errors: list[str] = field(default_factory=list)


def install_harness(sb: Sandbox) -> None:
    """Copy the runner, the report plugin and the ini into ``HARNESS_DIR``."""
    files = {p.name: p.read_bytes() for p in INCONTAINER.iterdir() if p.is_file()
             and p.suffix in (".py", ".ini")}
    sb.put_files(HARNESS_DIR, files)
    sb.put_files(OUT_DIR, {".keep": b""})


def pytest_argv(rootdir: str, repo: str, targets: list[str], report: str,
                per_test_timeout: float) -> list[str]:
    """The exact command run in the sandbox (argv list)."""
    return [
        PYTHON, "-I", "-B", f"{HARNESS_DIR}/run_pytest.py", repo, "--",
        "-c", f"{HARNESS_DIR}/pytest.ini", f"--rootdir={rootdir}",
        "-p", "proctor_report", "-p", "pytest_timeout", "-p", "no:cacheprovider",
        f"--proctor-report={report}", f"--timeout={per_test_timeout:g}",
        "--import-mode=prepend", "-q", "-rN", "--no-header", "--color=no",
        *targets,
    ]


def parse_report(text: str) -> tuple[dict[str, str], dict | None, list[str]]:
    """Read the plugin's JSONL: (test id -> outcome, session record or None, collection
    error ids). Lines that are not valid JSON are ignored (a half-written last line)."""
    outcomes: dict[str, str] = {}
    session = None
    collection_errors: list[str] = []
    for line in text.splitlines():
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "session" in obj:
            session = obj["session"]
        elif obj.get("collection_error"):
            collection_errors.append(obj["nodeid"])
        elif "nodeid" in obj:
            outcomes[obj["nodeid"]] = obj["outcome"]
    return outcomes, session, collection_errors


def run_suite(sb: Sandbox, suite: str, *, rootdir: str, repo: str, targets: list[str],
              per_test_timeout: float, suite_timeout: float) -> SuiteRun:
    """Run pytest on ``targets`` (paths relative to ``rootdir``) and read the report back."""
    report = f"{OUT_DIR}/{suite}-{secrets.token_hex(8)}.jsonl"
    argv = pytest_argv(rootdir, repo, targets, report, per_test_timeout)
    res = sb.run(argv, timeout=suite_timeout, cwd=rootdir)
    raw = sb.get_file(report)
    outcomes, session, coll_errors = parse_report(raw.decode("utf-8", "replace") if raw else "")
    return SuiteRun(
        suite=suite, outcomes=outcomes, command=res.command, exit_code=res.exit_code,
        duration_s=res.duration_s, output=res.output[-8000:],
        collected=session["collected"] if session else None,
        session_finished=session is not None and res.exit_code in COMPLETED_EXIT,
        timed_out=res.timed_out, collection_errors=coll_errors,
    )
