"""Several harness steps in one sandbox command (``proctor.sandbox.steps.run_steps``), on
every backend: each step's result is what a command of its own gives (exit code, output,
stdin, cwd, its own timeout), a failed required step stops the rest, a step whose output
the shared cap cut runs again alone, and the work directory is gone afterwards."""

from __future__ import annotations

import time

import pytest

from proctor.errors import InfraError
from proctor.sandbox import BACKENDS, Limits, Sandbox, Step, run_steps
from tests.counting_sandbox import CountingSandbox

BACKEND_PARAMS = [pytest.param("docker", marks=pytest.mark.docker),
                  pytest.param("local", marks=pytest.mark.local)]
W = "/tmp/proctor-steps-test"


@pytest.fixture(params=BACKEND_PARAMS)
def open_sb(request, no_leaks):
    env = request.getfixturevalue("docker_ready" if request.param == "docker" else "local_ready")
    opened: list[Sandbox] = []

    def make(limits: Limits = Limits()) -> Sandbox:
        sb = BACKENDS[request.param](env, limits=limits)
        opened.append(sb)
        return sb

    yield make
    for sb in opened:
        sb.close()


def test_each_step_gets_what_a_command_of_its_own_gets(open_sb):
    sb = open_sb()
    sb.run(["mkdir", "-p", "/work/repo"], timeout=10)
    steps = [
        Step("hello", ["echo", "hi"], 10),
        Step("fails", ["sh", "-c", "echo out; echo err >&2; exit 3"], 10),
        Step("stdin", ["sh", "-c", "cat; printf no-newline"], 10, stdin=b"a\nb\0c\n"),
        Step("cwd", ["pwd"], 10, cwd="/work/repo"),
        Step("scratch_w", ["sh", "-c", f"echo kept > {W}/x"], 10),
        Step("scratch_r", ["cat", f"{W}/x"], 10),
        Step("sleep", ["sleep", "0.3"], 10),
        Step("whoami", ["id", "-u"], 10),
    ]
    counting = CountingSandbox(sb)
    got = run_steps(counting, steps, workdir=W)
    assert counting.runs == 1
    for step in steps[:4] + steps[7:]:
        alone = sb.run(step.argv, timeout=10, cwd=step.cwd, stdin=step.stdin)
        # a command of its own interleaves its two streams in no fixed order
        assert (got[step.name].exit_code, sorted(got[step.name].output.splitlines())) == (
            alone.exit_code, sorted(alone.output.splitlines())), step.name
        assert got[step.name].argv == tuple(step.argv) and not got[step.name].truncated
    assert got["fails"].exit_code == 3 and got["fails"].output == "out\nerr\n"
    assert got["stdin"].output == "a\nb\0c\nno-newline"
    assert got["scratch_r"].output == "kept\n"
    assert 0.25 <= got["sleep"].duration_s < 3 and not got["sleep"].timed_out
    assert all(r.duration_s >= 0 for r in got.values())
    assert sb.run(["test", "-e", W], timeout=10).exit_code == 1  # removed at the end


def test_a_failed_required_step_stops_the_rest_and_others_do_not(open_sb):
    sb = open_sb()
    got = run_steps(sb, [Step("soft", ["false"], 10), Step("hard", ["sh", "-c", "exit 4"], 10,
                                                              required=True),
                         Step("after", ["echo", "never"], 10)], workdir=W)
    assert got["soft"].exit_code == 1 and got["hard"].exit_code == 4 and got["after"] is None
    got = run_steps(sb, [Step("hard", ["true"], 10, required=True),
                         Step("after", ["echo", "ran"], 10)], workdir=W)
    assert got["after"].output == "ran\n"


def test_a_step_that_overruns_its_timeout_is_timed_out_and_the_next_one_runs(open_sb):
    sb = open_sb()
    start = time.monotonic()
    got = run_steps(sb, [Step("slow", ["sleep", "60"], 1), Step("next", ["echo", "ok"], 10)],
                    workdir=W)
    assert time.monotonic() - start < 15
    assert got["slow"].timed_out and got["slow"].exit_code == 124
    assert got["next"].output == "ok\n" and not got["next"].timed_out
    killed = run_steps(sb, [Step("killed", ["sh", "-c", "kill -9 $$"], 10)], workdir=W)
    assert killed["killed"].exit_code == 137 and not killed["killed"].timed_out


def test_a_step_cut_at_the_shared_output_cap_runs_again_alone_after_its_required_steps(
        open_sb):
    sb = open_sb(Limits(output_cap=6000))
    big = "python3 -c \"print('x' * 3500)\""
    steps = [Step("setup", ["sh", "-c", f"echo made > {W}/made"], 10, required=True),
             Step("first", ["sh", "-c", big], 10),
             Step("second", ["sh", "-c", f"cat {W}/made; {big}"], 10)]
    counting = CountingSandbox(sb)
    got = run_steps(counting, steps, workdir=W)
    assert counting.runs == 2  # all together, then "second" again after "setup"
    assert got["first"].output == "x" * 3500 + "\n"
    assert got["second"].output == "made\n" + "x" * 3500 + "\n"
    assert not got["second"].truncated


def test_an_existing_work_dir_or_a_bad_name_is_refused(open_sb):
    sb = open_sb()
    sb.run(["mkdir", W], timeout=10)
    with pytest.raises(InfraError, match="exit 90"):
        run_steps(sb, [Step("a", ["true"], 10)], workdir=W)
    assert sb.run(["test", "-d", W], timeout=10).ok  # not removed: not ours
    with pytest.raises(ValueError):
        run_steps(sb, [Step("a b", ["true"], 10)], workdir="/tmp/x")
    with pytest.raises(ValueError):
        run_steps(sb, [Step("a", ["true"], 10), Step("a", ["true"], 10)], workdir="/tmp/x")
