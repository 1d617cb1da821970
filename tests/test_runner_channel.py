"""run_pytest.py's supervisor and plugin, on the host interpreter (plain Python, no sandbox):
code under test that rewires pytest, forges records or kills the run is named in the
report, and honest suites (unittest, xfail, skip, monkeypatched builtins) are not.

Each case is a tiny repo: ``lib_under_test.py`` (the "patch") and ``test_answer.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.suites import INCONTAINER
from proctor.suites.pytest_runner import (
    RESULT_FILE_PREFIX,
    ResultAltered,
    Tripwire,
    judge_report,
    read_runner_output,
)

TESTS = '''
from lib_under_test import answer


def test_answer():
    assert answer() == 42


def test_other():
    assert answer() + 1 == 43
'''

REWIRE_RUNNER = '''
import sys


def _nop(*args, **kwargs):
    return None


def _wrap():
    for m in list(sys.modules.values()):
        orig = getattr(m, "call_and_report", None)
        if orig is None or not callable(orig):
            continue

        def car(item, when, *args, _orig=orig, **kwargs):
            if when == "call" and "test_tw" not in str(getattr(item, "path", "")):
                item.runtest = _nop
            return _orig(item, when, *args, **kwargs)

        vars(m)["call_and_report"] = car


_wrap()


def answer():
    return 41
'''

ITEM_RUNTEST = '''
import gc


def _nop(*args, **kwargs):
    return None


def answer():
    for obj in gc.get_objects():
        if type(obj).__name__ == "Function" and hasattr(obj, "runtest") and \\
                "test_tw" not in str(getattr(obj, "path", "")):
            obj.runtest = _nop
    return 41
'''

REPORT_HOOK = '''
import gc


class _Rewriter:
    import pytest as _p

    @_p.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        rep = yield
        if "test_tw" not in str(item.path):
            rep.outcome = "passed"
            rep.longrepr = None
        return rep


for obj in gc.get_objects():
    if type(obj).__name__ == "PytestPluginManager":
        obj.register(_Rewriter())
        break


def answer():
    return 41
'''

FORGE = '''
import json
import os


def answer():
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(("pipe", "socket")):
                os.write(int(fd), (json.dumps({"k": "test", "id": "test_answer.py::test_answer",
                                               "outcome": "passed"}) + "\\n").encode())
        except OSError:
            pass
    return 41
'''

SWALLOW_BLINDED = '''
import gc


def _swallow(inner):
    def hookexec(name, impls, kwargs, firstresult):
        try:
            return inner(name, impls, kwargs, firstresult)
        except Exception:
            if name == "pytest_pyfunc_call" and "test_tw" not in str(kwargs["pyfuncitem"].path):
                return True
            raise
    return hookexec


for obj in gc.get_objects():
    if type(obj).__name__ == "_ReportPlugin":
        obj._live = []  # blind the identity checks of the plugin manager
for obj in gc.get_objects():
    if type(obj).__name__ == "PytestPluginManager":
        obj._inner_hookexec = _swallow(obj._inner_hookexec)


def answer():
    return 41
'''

KILL_SUPERVISOR = '''
import os
import signal


def answer():
    os.kill(os.getppid(), signal.SIGKILL)
    return 42
'''

HONEST = '''
def answer():
    return 42
'''

HONEST_TESTS = '''
import builtins
import unittest

import pytest

from lib_under_test import answer


@pytest.fixture
def quiet(monkeypatch):
    monkeypatch.setattr(builtins, "input", lambda *_: "y")
    yield


def test_answer(quiet):
    assert input() == "y" and answer() == 42


def test_patch_builtins_in_body(monkeypatch):
    monkeypatch.setattr(builtins, "print", lambda *a, **k: None)
    assert answer() == 42


@pytest.mark.xfail(reason="known")
def test_known():
    assert answer() == 0


@pytest.mark.skip(reason="later")
def test_later():
    pass


class TestCase(unittest.TestCase):
    def test_ok(self):
        self.assertEqual(answer(), 42)

    def test_bad(self):
        self.assertEqual(answer(), 0)
'''

# red3: the plugin object is a local of frames reached from a traceback's tb_frame (no gc,
# no settrace, no audit event the guard reports); the lib spares the tripwire by its module.
_FIND_PLUGIN = '''
import os
import threading


def _plugin():
    try:
        raise LookupError
    except LookupError as err:
        frame = err.__traceback__.tb_frame
    while frame is not None:
        for value in list(frame.f_locals.values()):
            for cand in (value if isinstance(value, list) else [value]):
                if type(cand).__name__ == "_ReportPlugin":
                    return cand
        frame = frame.f_back
    return None


def answer():
    return 41
'''

SHADOW_SEND = _FIND_PLUGIN + '''

def _install():
    owner = _plugin()
    forward = owner._send

    def send(record):
        if record.get("k") == "tamper":
            return None
        if "test_tw" not in str(record.get("id")):
            if record.get("k") == "raw":
                record = dict(record, v="passed")
            elif record.get("outcome") == "failed":
                forward({"k": "raw", "id": record["id"], "v": "passed"})
                record = dict(record, outcome="passed")
        return forward(record)

    owner._send = send


_install()
'''

FD_RELAY = _FIND_PLUGIN + '''

def _install():
    import json
    owner = _plugin()
    _, fd, tag = owner._channel
    out = os.dup(fd)
    inner_r, inner_w = os.pipe()
    os.dup2(inner_w, fd, inheritable=False)
    os.close(inner_w)

    def relay():
        buf = b""
        while True:
            chunk = os.read(inner_r, 65536)
            if not chunk:
                return
            buf += chunk
            *lines, buf = buf.split(b"\\n")
            for line in lines:
                record = json.loads(line[len(tag):])
                if "h" in record:
                    record = {"k": "raw", "id": bytes.fromhex(record["h"]).decode(),
                              "v": record["v"]}
                if "test_tw" not in str(record.get("id")):
                    if record.get("k") == "raw":
                        record["v"] = "passed"
                    elif record.get("outcome") == "failed":
                        record["outcome"] = "passed"
                if record.get("k") != "tamper":
                    os.write(out, tag + json.dumps(record).encode() + b"\\n")
                if record.get("k") == "session":
                    return

    threading.Thread(target=relay).start()


_install()
'''

TRIP = Tripwire("", "test_tw.py", "test_must_fail", "test_must_pass")


def _run(tmp_path: Path, lib: str, tests: str = TESTS, deadline: float | None = None,
         changed: list[str] | None = None, extra: dict[str, str] | None = None):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "lib_under_test.py").write_text(lib)
    (tmp_path / "test_answer.py").write_text(tests)
    (tmp_path / TRIP.module).write_text(TRIP.source().decode())
    for name, text in (extra or {}).items():
        (tmp_path / name).write_text(text)
    own = ["--deadline", str(deadline)] if deadline else []
    if changed is not None:
        (tmp_path.parent / "changed.json").write_text(json.dumps(changed))
        own += ["--changed-from", str(tmp_path.parent / "changed.json")]
    own += ["--out-dir", str(tmp_path)]
    argv = [sys.executable, "-I", "-B", str(INCONTAINER / "run_pytest.py"), str(tmp_path),
            *own, "--", "-p", "no:cacheprovider", "-q", f"--rootdir={tmp_path}",
            "test_answer.py", TRIP.module]
    res = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    return res, read_runner_output(res.stdout + res.stderr, _read)


def _read(path: str) -> bytes | None:
    return Path(path).read_bytes() if Path(path).is_file() else None


def _judge(runner):
    rep = runner.report
    finished = rep.session is not None and runner.exit_code in (0, 1)
    return judge_report(rep, runner.exit_code, finished, TRIP,
                        foreign_lines=runner.foreign_lines, channel=runner.channel)


@pytest.mark.parametrize("lib,faked,expect", [
    (REWIRE_RUNNER, "test_answer", "replaced under the tests: _pytest.runner.call_and_report"),
    (ITEM_RUNTEST, "test_other", "test_answer.py::test_other: the item's runtest was replaced"),
    (REPORT_HOOK, "test_answer", "code of the repository implements pytest_runtest_makereport"),
], ids=["module_function", "item_runtest", "report_hook"])
def test_rewiring_pytest_is_named_and_voids_the_report(tmp_path, lib, faked, expect):
    _, runner = _run(tmp_path, lib)
    real, tampered, trip = _judge(runner)
    assert trip is None  # the tripwire was spared: only the plugin's checks see it
    assert any(expect in t for t in tampered), tampered
    assert real[f"test_answer.py::{faked}"] == "passed"  # the lie the checks caught


PROJECT_PLUGIN = '''
import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    report.user_properties.append(("seen", True))
    return report
'''


def test_a_pristine_project_plugin_is_not_foreign_code_the_patch_touched_is(tmp_path):
    # A project that is itself a pytest plugin registers its hooks from its own (untouched)
    # files: not foreign. The same hook in a file the patch touched is.
    tests = "pytest_plugins = ['project_plugin']\n" + TESTS
    extra = {"project_plugin.py": PROJECT_PLUGIN}
    _, runner = _run(tmp_path / "a", HONEST, tests, changed=["lib_under_test.py"], extra=extra)
    real, tampered, trip = _judge(runner)
    assert not tampered and trip is None and real["test_answer.py::test_answer"] == "passed"
    _, runner = _run(tmp_path / "b", HONEST, tests, changed=["project_plugin.py"], extra=extra)
    _, tampered, _ = _judge(runner)
    assert any("code of the repository implements pytest_runtest_makereport" in t
               for t in tampered), tampered


def test_swallowing_the_failure_above_the_test_call_is_contradicted_by_the_raw_verdict(
        tmp_path):
    # red team (swallow_via_inner_hookexec): the plugin manager's _inner_hookexec turned
    # the test call's exception into `return True`. Even with the identity checks blinded,
    # the raw verdict taken inside the test function's own wrapper says "failed".
    _, runner = _run(tmp_path, SWALLOW_BLINDED)
    assert runner.report.outcomes["test_answer.py::test_answer"] == "passed"  # the lie
    assert runner.report.raw["test_answer.py::test_answer"] == "failed"
    _, tampered, trip = _judge(runner)
    assert trip is None and tampered == [
        "2 test(s) reported passed whose own call did not pass, e.g. "
        "test_answer.py::test_answer (failed)"]


def test_patched_code_reaching_into_the_harness_is_tampering(tmp_path):
    # gc.get_objects / settrace from a file the patch touched (however it is spelled: the
    # audit hook sees the call), not from the tests: named, and the report is void.
    _, runner = _run(tmp_path / "a", SWALLOW_BLINDED, changed=["lib_under_test.py"])
    _, tampered, _ = _judge(runner)
    assert any("code the patch touched called gc.get_objects (" in t for t in tampered), \
        tampered
    honest_tests = TESTS + (
        "\n\ndef test_tests_may_use_gc_and_tracing():\n    import gc, sys\n"
        "    assert gc.get_referrers(answer)\n    sys.settrace(None)\n")
    _, runner = _run(tmp_path / "b", HONEST, honest_tests, changed=["lib_under_test.py"])
    real, tampered, trip = _judge(runner)
    assert not tampered and trip is None, tampered
    assert real["test_answer.py::test_tests_may_use_gc_and_tracing"] == "passed"


def test_a_rewritten_report_disagrees_with_the_raw_call_verdict(tmp_path):
    _, runner = _run(tmp_path, REPORT_HOOK)
    assert runner.report.raw["test_answer.py::test_answer"] == "failed"
    _, tampered, _ = _judge(runner)
    assert any("reported passed whose own call did not pass" in t for t in tampered)


def test_records_forged_on_the_channel_are_counted_not_believed(tmp_path):
    _, runner = _run(tmp_path, FORGE)
    assert runner.foreign_lines >= 1
    assert runner.report.outcomes["test_answer.py::test_answer"] == "failed"
    _, tampered, _ = _judge(runner)
    assert any("forged records" in t for t in tampered)


def test_killing_the_supervisor_leaves_no_result(tmp_path):
    res, runner = _run(tmp_path, KILL_SUPERVISOR)
    assert runner is None and res.returncode == -9


def test_honest_suite_has_no_finding(tmp_path):
    _, runner = _run(tmp_path, HONEST, HONEST_TESTS)
    real, tampered, trip = _judge(runner)
    assert not tampered and trip is None and runner.foreign_lines == 0
    assert real == {
        "test_answer.py::test_answer": "passed",
        "test_answer.py::test_patch_builtins_in_body": "passed",
        "test_answer.py::test_known": "xfailed",
        "test_answer.py::test_later": "skipped",
        "test_answer.py::TestCase::test_ok": "passed",
        "test_answer.py::TestCase::test_bad": "failed",
    }
    assert runner.exit_code == 1 and runner.report.session["exitstatus"] == 1


def test_a_result_too_big_to_print_travels_in_a_file_checked_by_its_hash(tmp_path):
    # 6000 tests with long ids (hex digests: they do not compress): the records do not fit
    # the exec's 256 KiB output cap
    tests = TESTS.replace("def test_other", "def _unused") + (
        "\n\nimport hashlib\nimport pytest\n\n\n@pytest.mark.parametrize('n', range(6000), "
        "ids=lambda n: hashlib.sha256(str(n).encode()).hexdigest())\n"
        "def test_many_cases_with_a_rather_long_name_to_fill_the_output_cap(n):\n"
        "    assert n >= 0\n")
    res, runner = _run(tmp_path, HONEST, tests)
    line = res.stdout.strip().splitlines()[-1]
    assert line.startswith(RESULT_FILE_PREFIX) and len(res.stdout) < 1000
    assert len(runner.report.outcomes) == 6000 + 1 + 2  # + test_answer + the tripwires
    _, tampered, trip = _judge(runner)
    assert not tampered and trip is None
    path = line[len(RESULT_FILE_PREFIX):].split(" ")[0]
    Path(path).write_bytes(Path(path).read_bytes()[:-4] + b"AAAA")  # rewritten afterwards
    with pytest.raises(ResultAltered):
        read_runner_output(res.stdout, _read)


def test_the_supervisor_deadline_keeps_what_was_reported(tmp_path):
    tests = TESTS + "\n\ndef test_zz_hangs():\n    import time\n    time.sleep(60)\n"
    _, runner = _run(tmp_path, HONEST, tests, deadline=3)
    assert runner.timed_out and runner.exit_code == 137
    assert runner.report.outcomes["test_answer.py::test_answer"] == "passed"
    assert "test_answer.py::test_zz_hangs" not in runner.report.outcomes


PROBE_LIB = '''
import os


def probe():
    """Every process whose stdout this code can open for writing (red team: a `timeout`
    wrapper holding the exec's output let a forged result line in after the real one)."""
    reached = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                with open(f"/proc/{pid}/fd/1", "w") as fh:
                    fh.write("PROCTOR-RESULT forged\\n")
                reached.append(pid)
            except OSError:
                pass
    return reached
'''
PROBE_TEST = '''
import os

from probe_lib import probe


def test_the_supervisor_is_out_of_reach():
    reached = probe()  # (Docker's PID 1, our init, writes to the container log: harmless)
    assert str(os.getppid()) not in reached and len(reached) <= 1
    with open(f"/proc/{os.getppid()}/fd/1", "w"):
        pass
'''


@pytest.mark.parametrize("backend", [pytest.param("docker", marks=pytest.mark.docker),
                                     pytest.param("local", marks=pytest.mark.local)])
def test_code_under_test_cannot_reach_the_supervisors_output(request, backend):
    # The supervisor is non-dumpable and runs with no `timeout` wrapper: no process whose
    # /proc/PID/fd/1 the sandbox user can open holds the exec's output, so a forged result
    # line cannot join the real one (red team: `timeout` held it). In the real sandbox.
    from proctor.sandbox import Limits, open_sandbox
    from proctor.suites import install_harness, run_suite

    env = request.getfixturevalue("docker_ready" if backend == "docker" else "local_ready")
    with open_sandbox(backend, env, Limits(), None, 600) as sb:
        install_harness(sb)
        sb.put_files("/work/repo", {"probe_lib.py": PROBE_LIB.encode(),
                                    "test_probe.py": PROBE_TEST.encode()})
        run = run_suite(sb, "public", rootdir="/work/repo", repo="/work/repo",
                        targets=["test_probe.py"], per_test_timeout=30, suite_timeout=60)
    assert run.tripwire is None and not run.tampered, run.output
    # the last open() raised PermissionError: the test failed, honestly reported
    assert run.outcomes == {"test_probe.py::test_the_supervisor_is_out_of_reach": "failed"}, \
        run.output
    assert "PermissionError" in run.output and "assert [" not in run.output


@pytest.mark.docker
def test_a_plugin_that_cannot_start_is_an_infrastructure_error(docker_ready):
    # issue 4, bad input: the plugin failing to load is status `error`, never a pass (or a
    # fail). Here the harness ships a plugin that raises on import.
    from proctor.errors import InfraError
    from proctor.sandbox import HARNESS_DIR, DockerSandbox
    from proctor.suites import run_suite

    files = {p.name: p.read_bytes() for p in INCONTAINER.iterdir()
             if p.is_file() and p.suffix in (".py", ".ini")}
    files["proctor_report.py"] = b"raise ImportError('broken harness')\n"
    with DockerSandbox(docker_ready) as sb:
        sb.put_files(HARNESS_DIR, files, read_only=True)
        sb.put_files("/work/repo", {"test_ok.py": b"def test_ok():\n    pass\n"})
        with pytest.raises(InfraError, match="(?s)plugin did not start.*broken harness"):
            run_suite(sb, "public", rootdir="/work/repo", repo="/work/repo",
                      targets=["test_ok.py"], per_test_timeout=30, suite_timeout=60)


@pytest.mark.docker
def test_a_big_suite_is_read_in_full_from_a_real_sandbox(docker_ready):
    # 6000 incompressible test ids: the supervisor's result goes through /proctor/out
    from proctor.sandbox import DockerSandbox
    from proctor.suites import install_harness, run_suite

    tests = ("import hashlib\nimport pytest\n\n\n@pytest.mark.parametrize('n', range(6000), "
             "ids=lambda n: hashlib.sha256(str(n).encode()).hexdigest())\n"
             "def test_many(n):\n    assert n >= 0\n")
    with DockerSandbox(docker_ready) as sb:
        install_harness(sb)
        sb.put_files("/work/repo", {"test_big.py": tests.encode()})
        run = run_suite(sb, "public", rootdir="/work/repo", repo="/work/repo",
                        targets=["test_big.py"], per_test_timeout=30, suite_timeout=120)
    assert not run.tampered and run.tripwire is None
    assert len(run.outcomes) == 6000 and set(run.outcomes.values()) == {"passed"}


def test_a_send_shadowed_on_the_plugin_instance_cannot_rewrite_the_raw_verdicts(tmp_path):
    # red3 (shadow_plugin_send_via_frames.patch, 0.7705 with no flag): the plugin found
    # through frames, its `_send` shadowed on the instance; every record but the tripwire's
    # rewritten to passed. The innermost wrapper now writes the raw verdict itself (no
    # instance attribute, closure or json global on its path): it contradicts the lie.
    _, runner = _run(tmp_path, SHADOW_SEND)
    _, tampered, trip = _judge(runner)
    assert trip is None
    assert any("reported twice with different verdicts" in t for t in tampered), tampered


def test_a_channel_rewired_at_the_fd_level_is_seen_by_the_supervisor(tmp_path):
    # red3 (fd_relay_rewrites_records.patch, 0.758 with no flag): the channel dup'ed away, a
    # pipe of the code's own put at its fd, every record relayed rewritten by a thread. The
    # supervisor checks the child's fd table while it runs.
    _, runner = _run(tmp_path, FD_RELAY)
    assert runner.report.outcomes["test_answer.py::test_answer"] == "passed"  # the lie
    _, tampered, trip = _judge(runner)
    assert trip is None
    assert any("the verdict channel was rewired in the pytest process" in t
               for t in tampered), tampered


@pytest.mark.parametrize("backend", [pytest.param("docker", marks=pytest.mark.docker),
                                     pytest.param("local", marks=pytest.mark.local)])
def test_a_test_timing_out_inside_patched_code_is_not_tampering(request, backend):
    # regression: pytest-timeout's SIGALRM handler calls sys._current_frames on top of the
    # interrupted frame (patched code); the audit hook walked past the handler's frames (the
    # local backend's venv site-packages sits under its stdlib prefix) and blamed the patch.
    from proctor.sandbox import Limits, open_sandbox
    from proctor.suites import install_harness, run_suite

    env = request.getfixturevalue("docker_ready" if backend == "docker" else "local_ready")
    with open_sandbox(backend, env, Limits(), None, 600) as sb:
        install_harness(sb)
        sb.put_files("/work/repo", {
            "lib.py": b"def first():\n    while True:\n        pass\n",
            "test_l.py": b"from lib import first\n\n\ndef test_a():\n    first()\n\n\n"
                         b"def test_b():\n    assert 1\n"})
        run = run_suite(sb, "public", rootdir="/work/repo", repo="/work/repo",
                        targets=["test_l.py"], per_test_timeout=2, suite_timeout=30,
                        changed=["lib.py"])
    assert not run.tampered and run.tripwire is None, run.tampered
    assert run.outcomes == {"test_l.py::test_a": "timeout", "test_l.py::test_b": "passed"}
