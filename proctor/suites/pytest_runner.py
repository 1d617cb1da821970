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
#: Exit status of run_pytest.py's audit hook when the code under test replaced a function's
#: code object or installed an audit hook: the runner was subverted (a tripwire, -1.0).
SUBVERTED_EXIT = 86


@dataclass
class SuiteRun:
    """One run of one suite. ``outcomes`` maps test id -> outcome (see proctor_report);
    empty when ``tampered`` lists reasons to distrust the report (every test then counts as
    failed). ``tripwire`` says why the runner was subverted (reward -1.0), or is None."""

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
    tampered: list[str] = field(default_factory=list)
    tripwire: str | None = None


def install_harness(sb: Sandbox) -> None:
    """Copy the runner, the report plugin and the ini into ``HARNESS_DIR``, root-owned and
    read-only: the code under test cannot replace them between runs."""
    files = {p.name: p.read_bytes() for p in INCONTAINER.iterdir() if p.is_file()
             and p.suffix in (".py", ".ini")}
    sb.put_files(HARNESS_DIR, files, read_only=True)


def put_private_file(sb: Sandbox, name: str, data: bytes) -> str:
    """Write one file, root-owned and read-only, into a fresh directory under ``/proctor``
    (a root-owned area the sandbox user can neither write nor fill); returns its path.
    Each call gets its own directory: a read-only directory takes no second file."""
    where = f"/proctor/l-{secrets.token_hex(8)}"
    sb.put_files(where, {name: data}, read_only=True)
    return f"{where}/{name}"


def put_path_list(sb: Sandbox, paths: list[str]) -> str:
    """Write ``paths`` as a JSON list to a root-owned, read-only file (see
    :func:`put_private_file`) and return its path, for the in-sandbox scripts' ``--paths-from``.
    A patch touching thousands of long paths made their argv too long for ``exec``
    (E2BIG), an infrastructure error the patch chose; a file has no such limit, and the
    sandbox user cannot write or fill ``/proctor``."""
    return put_private_file(sb, "paths.json", json.dumps(list(paths)).encode())


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


FAILING = ("failed", "error", "timeout", "xpassed")


@dataclass(frozen=True)
class Tripwire:
    """A test module with random names put next to each run: ``must_fail`` asserts False,
    ``must_pass`` passes (DESIGN section 5)."""

    dir: str
    module: str
    must_fail: str
    must_pass: str

    @classmethod
    def new(cls) -> Tripwire:
        t = secrets.token_hex(6)
        return cls(f"/proctor/t-{secrets.token_hex(6)}", f"test_{t}.py",
                   f"test_{secrets.token_hex(6)}", f"test_{secrets.token_hex(6)}")

    def source(self) -> bytes:
        return (f"def {self.must_fail}():\n    assert 0 == 1\n\n\n"
                f"def {self.must_pass}():\n    assert 1 == 1\n").encode()


def judge_report(outcomes: dict[str, str], session: dict | None, exit_code: int,
                 finished: bool, trip: Tripwire) -> tuple[dict[str, str], list[str], str | None]:
    """Cross-check the report with the exit code and the tripwires (pure).

    Returns (outcomes without the tripwires, tampering reasons, tripwire verdict or None).
    A must-fail tripwire that did not fail, or missing tripwires in a session that ran to its
    end, means the runner was subverted. A session record disagreeing with the exit code,
    verdicts disagreeing with it (exit 0 with failures, exit 1 without), or a session that
    ended before the must-fail tripwire reported, means the report cannot be trusted.
    """
    names = (f"::{trip.must_fail}", f"::{trip.must_pass}")
    trips = {k: v for k, v in outcomes.items() if k.endswith(names)}
    real = {k: v for k, v in outcomes.items() if k not in trips}
    fail = next((v for k, v in trips.items() if k.endswith(trip.must_fail)), None)
    tripwire = None
    tampered = []
    if fail is not None and fail != "failed":
        tripwire = f"must-fail tripwire reported {fail}"
    elif fail is None and finished:
        tripwire = "tripwire missing from a session that ran to its end"
    elif fail is None:
        # The run ended (killed, crashed, exited) before the must-fail tripwire reported:
        # nothing vouches for the verdicts it did write (code that fakes passes and then
        # ends the process before the tripwire runs scored as a complete fix).
        tampered.append("the session ended before the must-fail tripwire reported: its "
                        "verdicts cannot be vouched for")
    if session is not None and session.get("exitstatus") != exit_code and finished:
        tampered.append(f"session record says exit {session.get('exitstatus')}, "
                        f"process exited {exit_code}")
    failing = any(v in FAILING for v in outcomes.values())
    if exit_code == 0 and failing:
        tampered.append("exit code 0 but the report lists failures")
    if exit_code == 1 and not failing:
        tampered.append("exit code 1 but the report lists no failure")
    return real, tampered, tripwire


def run_suite(sb: Sandbox, suite: str, *, rootdir: str, repo: str, targets: list[str],
              per_test_timeout: float, suite_timeout: float) -> SuiteRun:
    """Run pytest on ``targets`` (paths relative to ``rootdir``) plus a fresh tripwire module,
    and read the report back."""
    trip = Tripwire.new()
    # Earlier reports are read already; the writable areas are sized, so a report padded by
    # the code under test must not leave the next suite without room for its own.
    sb.run(["sh", "-c", f"rm -rf {OUT_DIR}/* {OUT_DIR}/.[!.]* 2>/dev/null; true"], timeout=30)
    sb.put_files(trip.dir, {trip.module: trip.source()}, read_only=True)
    report = f"{OUT_DIR}/{suite}-{secrets.token_hex(8)}.jsonl"
    # At a random place among the targets: "spare the last module" must not find it.
    ordered = list(targets)
    ordered.insert(secrets.randbelow(len(ordered) + 1), f"{trip.dir}/{trip.module}")
    argv = pytest_argv(rootdir, repo, ordered, report, per_test_timeout)
    res = sb.run(argv, timeout=suite_timeout, cwd=rootdir)
    raw = sb.get_file(report)
    outcomes, session, coll_errors = parse_report(raw.decode("utf-8", "replace") if raw else "")
    finished = session is not None and res.exit_code in COMPLETED_EXIT
    real, tampered, tripwire = judge_report(outcomes, session, res.exit_code, finished, trip)
    if res.exit_code == SUBVERTED_EXIT and not res.timed_out:
        tripwire = ("the runner's audit hook stopped the code under test: "
                    + (res.output.rsplit("proctor: the code under test ", 1)[-1].strip()[:200]
                       if "proctor: the code under test " in res.output else "exit status "
                       f"{SUBVERTED_EXIT}"))
    return SuiteRun(
        suite=suite, outcomes={} if tampered or tripwire else real, command=res.command,
        exit_code=res.exit_code, duration_s=res.duration_s, output=res.output[-8000:],
        collected=session["collected"] if session else None, session_finished=finished,
        timed_out=res.timed_out, collection_errors=coll_errors, tampered=tampered,
        tripwire=tripwire,
    )
