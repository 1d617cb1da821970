"""Run one test suite in a sandbox the way DESIGN section 5 asks, and read its report.

The harness owns the invocation: the image's isolated interpreter (``python -I -B``),
Proctor's ini via ``-c``, an explicit ``--rootdir``, plugin autoload off with our plugins
named by ``-p``, the cache provider off, a per-test timeout (pytest-timeout) inside an
outer deadline for the suite. Verdicts come from the records our plugin streams to the
supervisor of ``run_pytest.py`` over a private pipe, which it alone forwards to the
harness; pytest's stdout is never parsed for verdicts.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from proctor.errors import InfraError
from proctor.sandbox.base import Sandbox
from proctor.suites.tripwires import EmbeddedTripwire

INCONTAINER = Path(__file__).parent / "incontainer"
HARNESS_DIR = "/proctor/harness"
OUT_DIR = "/proctor/out"
PYTHON = "/opt/proctor/venv/bin/python"
#: pytest exit statuses that mean "the session ran to its end" (0 all passed, 1 some failed).
COMPLETED_EXIT = (0, 1)
#: Exit status of run_pytest.py's audit hook when the code under test replaced a function's
#: code object or installed an audit hook: the runner was subverted (a tripwire, -1.0).
SUBVERTED_EXIT = 86
#: The supervisor's result line and its own failure line (run_pytest.py).
RESULT_PREFIX = "PROCTOR-RESULT "
HARNESS_ERROR = "PROCTOR-HARNESS-ERROR "
RESULT_FILE_PREFIX = "PROCTOR-RESULT-FILE "
#: Largest decompressed result believed (bytes): ~1 KiB per test for 100,000 tests.
MAX_RESULT_BYTES = 128 * 1024**2
#: The supervisor stops pytest this long (s) before the outer timeout, to report in time.
DEADLINE_MARGIN_S = 5.0


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
    #: Processes of the sandbox user alive after the run (None: unknown, e.g. no result).
    stray_processes: int | None = None


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


def pytest_argv(rootdir: str, repo: str, targets: list[str], per_test_timeout: float,
                deadline: float | None = None, changed_from: str | None = None) -> list[str]:
    """The exact command run in the sandbox (argv list). ``deadline``: seconds after which
    the supervisor kills pytest and reports what it has (None: no own deadline);
    ``changed_from``: a JSON file listing the paths the patch touched."""
    own = ["--deadline", f"{deadline:g}"] if deadline is not None else []
    own += ["--changed-from", changed_from] if changed_from else []
    own += ["--out-dir", OUT_DIR]
    return [
        PYTHON, "-I", "-B", f"{HARNESS_DIR}/run_pytest.py", repo, *own, "--",
        "-c", f"{HARNESS_DIR}/pytest.ini", f"--rootdir={rootdir}",
        "-p", "pytest_timeout", "-p", "no:cacheprovider", f"--timeout={per_test_timeout:g}",
        "--import-mode=prepend", "-q", "-rN", "--no-header", "--color=no",
        *targets,
    ]


@dataclass
class StreamedReport:
    """What the plugin streamed (see proctor_report): outcomes from pytest's reports, raw
    verdicts of the test calls, the session record, collection errors, the plugin's own
    tampering findings, whether it started at all, and tests reported twice differently."""

    outcomes: dict[str, str] = field(default_factory=dict)
    raw: dict[str, str] = field(default_factory=dict)
    session: dict | None = None
    collection_errors: list[str] = field(default_factory=list)
    tamper: list[str] = field(default_factory=list)
    started: bool = False
    conflicts: list[str] = field(default_factory=list)
    malformed: int = 0


def parse_records(records: list[str]) -> StreamedReport:
    """Read the plugin's records (JSON texts, in the order streamed; pure; never raises).
    Records that are not JSON objects of a known kind are counted in ``malformed``: only
    lines with the run's nonce get here, and the plugin writes none such, so they come from
    code that found the channel (red3: a record nested 50,000 deep made ``json.loads`` raise
    RecursionError on the host, and the rollout came back unscored)."""
    rep = StreamedReport()
    for line in records:
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError, MemoryError):
            rep.malformed += 1
            continue
        kind = obj.get("k") if isinstance(obj, dict) else None
        if kind not in ("started", "test", "raw", "collection_error", "tamper", "session"):
            rep.malformed += 1
        elif kind == "started":
            rep.started = True
        elif kind == "test":
            nodeid, outcome = str(obj.get("id")), str(obj.get("outcome"))
            if rep.outcomes.get(nodeid, outcome) != outcome:
                rep.conflicts.append(nodeid)
            rep.outcomes[nodeid] = outcome
        elif kind == "raw":
            nodeid, verdict = str(obj.get("id")), str(obj.get("v"))
            if "h" in obj:  # the innermost wrapper writes the id in hex (no json on its path)
                try:
                    nodeid = bytes.fromhex(str(obj["h"])).decode("utf-8", "surrogatepass")
                except ValueError:
                    rep.malformed += 1
                    continue
            if rep.raw.get(nodeid, verdict) != verdict:
                rep.conflicts.append(nodeid)
            rep.raw[nodeid] = verdict
        elif kind == "collection_error":
            rep.collection_errors.append(str(obj.get("id")))
        elif kind == "tamper":
            rep.tamper.append(str(obj.get("why"))[:300])
        elif kind == "session":
            rep.session = obj
    return rep


@dataclass
class RunnerResult:
    """The supervisor's account of one run (run_pytest.py): the plugin's records, pytest's
    exit status, whether the supervisor's deadline killed it, lines on the verdict channel
    without the run's nonce (forged), the tail of pytest's output, and how many processes
    of the user outlived pytest (None: unknown)."""

    report: StreamedReport
    exit_code: int
    timed_out: bool
    foreign_lines: int
    output: str
    channel: list[str] = field(default_factory=list)
    stray_processes: int | None = None


def read_runner_output(output: str, fetch=None) -> RunnerResult | None:
    """Decode the supervisor's result from the exec's output; None when there is none (the
    supervisor was killed: by the code under test, or by the outer timeout).

    A result too big to print comes as ``PROCTOR-RESULT-FILE <path> <sha256>``: ``fetch``
    (path -> bytes or None) reads the file, which must still hash to what the supervisor
    printed (something left running by the code under test may have rewritten it).

    Raises:
        InfraError: the supervisor itself failed (it says so on a line of its own), or its
            result cannot be decoded.
        ResultAltered: the result file is gone or does not match its printed hash, or the
            output holds more than one result line.
    """
    if sum(line.startswith("PROCTOR-") for line in output.splitlines()) > 1:
        raise ResultAltered("more than one result line on the runner's output")
    for line in reversed(output.splitlines()):
        if line.startswith(HARNESS_ERROR):
            raise InfraError(f"pytest runner: {line[len(HARNESS_ERROR):][:500]}")
        if line.startswith(RESULT_FILE_PREFIX):
            path, _, digest = line[len(RESULT_FILE_PREFIX):].partition(" ")
            blob = fetch(path) if fetch is not None else None
            if blob is None or hashlib.sha256(blob).hexdigest() != digest.strip():
                raise ResultAltered(f"the runner's result file {path} is missing or altered")
            return _decode_result(blob)
        if line.startswith(RESULT_PREFIX):
            return _decode_result(line[len(RESULT_PREFIX):].encode())
    return None


class ResultAltered(Exception):
    """The supervisor's result file changed after it was written (tampering)."""


def _decode_result(blob: bytes) -> RunnerResult:
    """Decode one result, at most ``MAX_RESULT_BYTES`` once decompressed: a bigger one holds
    records the plugin never writes at that rate (red3: code that learned the nonce could
    make every rollout cost the scoring host gigabytes), so it is tampering."""
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(base64.b64decode(blob), MAX_RESULT_BYTES)
        if inflate.unconsumed_tail:
            raise ResultAltered(f"the runner's result is over {MAX_RESULT_BYTES} bytes")
        data = json.loads(raw)
    except (ValueError, zlib.error) as exc:
        raise InfraError(f"pytest runner: unreadable result: {exc}") from exc
    strays = data.get("stray_processes")
    return RunnerResult(parse_records(data["records"]), int(data["exit"]),
                        bool(data["timed_out"]), int(data["foreign_lines"]),
                        str(data["output"]), [str(c) for c in data.get("channel") or []],
                        strays if type(strays) is int else None)


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


def judge_report(report: StreamedReport, exit_code: int, finished: bool, trip: Tripwire,
                 embedded: EmbeddedTripwire | None = None, foreign_lines: int = 0,
                 channel: list[str] = (),
                 ) -> tuple[dict[str, str], list[str], str | None]:
    """Cross-check the streamed report with the exit code, the raw call verdicts and the
    tripwires (pure).

    Returns (outcomes without the tripwires, tampering reasons, tripwire verdict or None).
    Runner subverted (tripwire, reward -1.0): a must-fail tripwire (stand-alone, or the one
    embedded among the hidden tests) that passed, or missing tripwires in a session that ran
    to its end. Report not to be believed (tampering; every test then counts as failed): the
    plugin saw pytest's runner rewired, a test reported passed whose own call did not pass
    (or never ran), a test reported twice with different verdicts, lines on the verdict
    channel without the run's nonce or that the plugin never writes, the channel itself
    rewired in the pytest process (``channel``, from the supervisor), a session record
    disagreeing with the exit code,
    verdicts disagreeing with it (exit 0 with failures, exit 1 without), or a session that
    ended before the must-fail tripwire reported.
    """
    outcomes = report.outcomes
    names = (f"::{trip.must_fail}", f"::{trip.must_pass}")
    trips = {k for k in outcomes if k.endswith(names) or (embedded and embedded.matches(k))}
    real = {k: v for k, v in outcomes.items() if k not in trips}
    fail = next((v for k, v in outcomes.items() if k.endswith(names[0])), None)
    hidden_fail = next((v for k, v in outcomes.items() if embedded and embedded.matches(k)),
                       None)
    tripwire = None
    tampered = [f"the runner was tampered with: {why}" for why in report.tamper]
    if fail is not None and fail != "failed":
        tripwire = f"must-fail tripwire reported {fail}"
    elif hidden_fail == "passed":
        tripwire = "a must-fail tripwire hidden among the hidden tests passed"
    elif fail is None and finished:
        tripwire = "tripwire missing from a session that ran to its end"
    elif fail is None:
        # The run ended (killed, crashed, exited) before the must-fail tripwire reported:
        # nothing vouches for the verdicts it did write (code that fakes passes and then
        # ends the process before the tripwire runs scored as a complete fix).
        tampered.append("the session ended before the must-fail tripwire reported: its "
                        "verdicts cannot be vouched for")
    unproven = sorted(k for k, v in real.items() if v == "passed" and report.raw.get(k) !=
                      "passed")
    if unproven:
        why = report.raw.get(unproven[0], "never ran")
        tampered.append(f"{len(unproven)} test(s) reported passed whose own call did not pass,"
                        f" e.g. {unproven[0]} ({why})")
    if report.conflicts:
        tampered.append(f"{len(report.conflicts)} test(s) reported twice with different "
                        f"verdicts, e.g. {report.conflicts[0]}")
    tampered += [f"the verdict channel was rewired in the pytest process: {why}"
                 for why in channel]
    if report.malformed:
        tampered.append(f"{report.malformed} record(s) on the verdict channel that the plugin "
                        "never writes: forged records")
    if foreign_lines:
        tampered.append(f"{foreign_lines} line(s) on the verdict channel without the run's "
                        "nonce: forged records")
    session = report.session
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
              per_test_timeout: float, suite_timeout: float,
              embedded: EmbeddedTripwire | None = None,
              changed: list[str] | None = None,
              also_put: dict[str, dict[str, bytes]] | None = None) -> SuiteRun:
    """Run pytest on ``targets`` (paths relative to ``rootdir``) plus a fresh tripwire module
    (and ``embedded``, a tripwire already placed among the targets), and judge what the
    supervisor streamed back. ``changed``: repo-relative paths the patch touched (code there
    may not implement a verdict hook; None: nowhere in the repo but a conftest.py).
    ``also_put``: more fresh read-only directories under ``/proctor`` (absolute path ->
    relative path -> bytes; the hidden tests, say) put in the same operation as the
    tripwire's. Two sandbox operations: the tripwire's directory (with the list, and
    ``also_put``), the run.

    Raises:
        InfraError: the sandbox failed, or the runner or its plugin could not start.
    """
    trip = Tripwire.new()
    files = {trip.module: trip.source()}
    if changed is not None:
        files["changed.json"] = json.dumps(sorted(changed)).encode()
    sb.put_read_only_dirs({trip.dir: files, **(also_put or {})})
    # At a random place among the targets: "spare the last module" must not find it.
    ordered = list(targets)
    ordered.insert(secrets.randbelow(len(ordered) + 1), f"{trip.dir}/{trip.module}")
    deadline = max(1.0, suite_timeout - min(DEADLINE_MARGIN_S, 0.1 * suite_timeout))
    argv = pytest_argv(rootdir, repo, ordered, per_test_timeout, deadline,
                       f"{trip.dir}/changed.json" if changed is not None else None)
    # No `timeout` wrapper: only the (non-dumpable) supervisor holds the exec's output.
    res = sb.run(argv, timeout=suite_timeout, cwd=rootdir, own_deadline=True)
    try:
        runner = read_runner_output(res.output, sb.get_file)
    except ResultAltered as exc:
        return SuiteRun(suite=suite, outcomes={}, command=res.command, exit_code=res.exit_code,
                        duration_s=res.duration_s, output=res.output[-8000:],
                        timed_out=res.timed_out, tampered=[str(exc)])
    if runner is None:  # the supervisor never reported: killed from inside, or timed out
        tampered = [] if res.timed_out else [
            f"the runner's supervisor was killed before it reported (exit {res.exit_code})"]
        return SuiteRun(suite=suite, outcomes={}, command=res.command, exit_code=res.exit_code,
                        duration_s=res.duration_s, output=res.output[-8000:],
                        timed_out=res.timed_out, tampered=tampered)
    report = runner.report
    if not report.started:
        raise InfraError(f"the harness's pytest plugin did not start (exit {runner.exit_code}):"
                         f" {runner.output[-1500:]}")
    timed_out = runner.timed_out or res.timed_out
    finished = (report.session is not None and runner.exit_code in COMPLETED_EXIT
                and not timed_out)
    real, tampered, tripwire = judge_report(report, runner.exit_code, finished, trip,
                                            embedded, runner.foreign_lines, runner.channel)
    if runner.exit_code == SUBVERTED_EXIT and not timed_out:
        marker = "proctor: the code under test "
        tripwire = ("the runner's audit hook stopped the code under test: "
                    + (runner.output.rsplit(marker, 1)[-1].strip()[:200]
                       if marker in runner.output else f"exit status {SUBVERTED_EXIT}"))
    return SuiteRun(
        suite=suite, outcomes={} if tampered or tripwire else real, command=res.command,
        exit_code=runner.exit_code, duration_s=res.duration_s, output=runner.output[-8000:],
        collected=report.session.get("collected") if report.session else None,
        session_finished=finished, timed_out=timed_out,
        collection_errors=report.collection_errors, tampered=tampered, tripwire=tripwire,
        stray_processes=runner.stray_processes,
    )
