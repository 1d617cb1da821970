"""Mutants made on the host (warm ``mutmut_adapter.py serve``) are the sandbox's mutants.

The host generator only saves CPU: the mutants it makes, and the rewritten sources, must
be byte-identical to what ``mutmut_adapter.py generate`` makes in the sandbox, and when its
reading of the patched text differs from what ``git apply`` wrote, the sandbox generates.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections import OrderedDict

import pytest

from proctor import generator_process, load_task, score
from proctor.harness.pipeline import open_task_sandbox
from proctor.sandbox import HARNESS_DIR, PYTHON, DockerSandbox, SandboxSpec
from proctor.suites import mutant_generator

BUGGY_FILE = "toolz/itertoolz.py"


@pytest.fixture(autouse=True)
def _no_kept_answers(monkeypatch):
    """Each test asks its generators afresh: an answer an earlier test kept would answer."""
    monkeypatch.setattr(mutant_generator, "_answers", OrderedDict())
    monkeypatch.setattr(mutant_generator, "_answers_bytes", 0)


def _extra_branch(mk) -> tuple[str, str]:
    """The reference fix plus an untested branch (4 mutants: tests/test_e2e_mutation.py)."""
    fixed = mk.GETTER_ORIGINAL.replace(
        "    else:\n        return operator.itemgetter(index)\n",
        "    elif index is None:\n        return lambda x: x\n"
        "    else:\n        return operator.itemgetter(index)\n")
    return mk.GETTER_BUGGY, fixed


@pytest.mark.docker
def test_host_generation_is_byte_identical_to_the_sandboxs(docker_ready, toolz_task,
                                                           toolz_make_task):
    old, new = _extra_branch(toolz_make_task)
    code = (toolz_task / "repo" / BUGGY_FILE).read_text().replace(old, new)
    first = code.splitlines().index("def getter(index):") + 1
    lines = list(range(first, first + 12))
    with open_task_sandbox(load_task(toolz_task), SandboxSpec(docker_ready)) as sb:
        host = mutant_generator.generate(sb, {BUGGY_FILE: (code, lines)})
        spec = {"root": "/tmp/g", "files": {BUGGY_FILE: lines}}
        sb.put_files("/tmp/g", {BUGGY_FILE: code.encode(),
                                "gen.json": json.dumps(spec).encode()})
        res = sb.run([PYTHON, "-I", "-B", f"{HARNESS_DIR}/mutmut_adapter.py", "generate",
                      "/tmp/g/gen.json"], cwd="/", timeout=60)
        assert res.ok, res.output
        in_sandbox = json.loads(res.output.strip().rpartition("\n")[2])
        rewritten = sb.get_file(f"/tmp/g/{BUGGY_FILE}").decode()
    assert host is not None
    assert len(host["mutants"]) >= 4  # every changed-line mutant of getter
    assert host["mutants"] == in_sandbox["mutants"]
    assert host["errors"] == in_sandbox["errors"] == []
    assert host["files"] == {BUGGY_FILE: rewritten}
    assert rewritten != code


#: Sections split by form feeds (GNU style): ``str.splitlines`` splits there, Python does not.
FORM_FEEDS = "def a(x):\n    return x + 1\n\n\x0c\n\ndef b(x):  # \x0c\n    return x * 2\n"


@pytest.mark.docker
def test_decorated_functions_and_form_feeds_make_the_same_mutants_on_host_and_sandbox(
        docker_ready):
    from proctor.suites import install_harness
    from tests.test_mutation import DECORATED, DECORATED_CHANGED, _body_lines

    files = {"pkg/deco.py": (DECORATED, _body_lines(DECORATED, DECORATED_CHANGED)),
             "pkg/ff.py": (FORM_FEEDS, [7])}
    with DockerSandbox(docker_ready) as sb:
        install_harness(sb)
        host = mutant_generator.generate(sb, files)
        spec = {"root": "/tmp/g", "files": {p: n for p, (_c, n) in files.items()}}
        sb.put_files("/tmp/g", {"gen.json": json.dumps(spec).encode(),
                                **{p: c.encode() for p, (c, _n) in files.items()}})
        res = sb.run([PYTHON, "-I", "-B", f"{HARNESS_DIR}/mutmut_adapter.py", "generate",
                      "/tmp/g/gen.json"], cwd="/", timeout=60)
        assert res.ok, res.output
        in_sandbox = json.loads(res.output.strip().rpartition("\n")[2])
        rewritten = {p: sb.get_file(f"/tmp/g/{p}").decode() for p in files}
    assert host is not None and host["errors"] == in_sandbox["errors"] == []
    assert host["mutants"] == in_sandbox["mutants"] and len(host["mutants"]) == 64
    assert host["unmutated"] == in_sandbox["unmutated"] and len(host["unmutated"]) == 2
    assert host["files"] == rewritten
    assert [(m["name"], m["line"]) for m in host["mutants"] if m["path"] == "pkg/ff.py"] == [
        ("pkg.ff.x_b__mutmut_1", 7), ("pkg.ff.x_b__mutmut_2", 7)]


@pytest.mark.docker
def test_an_unparsable_file_is_an_error_not_a_dead_generator(docker_ready):
    with DockerSandbox(docker_ready) as sb:
        bad = mutant_generator.generate(sb, {"pkg/m.py": ("def f(:\n    return 1\n", [1])})
        good = mutant_generator.generate(sb, {"pkg/m.py": ("def f(a):\n    return a + 1\n",
                                                           [2])})
    assert bad["mutants"] == [] and bad["files"] == {}
    assert [e.split(":")[0] for e in bad["errors"]] == ["pkg/m.py"]
    assert [m["name"] for m in good["mutants"]] == ["pkg.m.x_f__mutmut_1", "pkg.m.x_f__mutmut_2"]


@pytest.mark.docker
def test_a_request_over_its_timeout_gives_none_and_the_next_one_works(docker_ready):
    src = {"pkg/m.py": ("def f(a):\n    return a + 1\n", [2])}
    with DockerSandbox(docker_ready) as sb:
        assert mutant_generator.generate(sb, src) is not None  # warm
        pool = mutant_generator._pool_for(sb)
        mutant_generator.forget_answers()  # asked of the process each time, not kept
        assert mutant_generator.generate(sb, src, timeout=0.0) is None
        assert all(s.alive for s in pool.idle)  # the timed-out process is gone, not idle
        assert mutant_generator.generate(sb, src)["mutants"]


@pytest.mark.docker
def test_off_switch_and_a_wrong_host_reading_both_fall_back_to_the_sandbox(
        toolz_task, toolz_patches, monkeypatch):
    import proctor.suites.mutation as mutation

    host = score(toolz_task, toolz_patches["reference"], rollout_id="host")
    assert host.evidence["mutation"].details["generated_on"] == "host"

    # The host's reading of the patched file is off by one character: its digest differs
    # from what git apply wrote, so the sandbox generates (and the result is unchanged).
    real = mutation.patched_texts
    monkeypatch.setattr(mutation, "patched_texts", lambda text, pristine: {
        p: (t + "#") if t else t for p, t in real(text, pristine).items()})
    wrong = score(toolz_task, toolz_patches["reference"], rollout_id="wrong-reading")
    monkeypatch.undo()
    monkeypatch.setenv("PROCTOR_HOST_MUTANTS", "0")
    off = score(toolz_task, toolz_patches["reference"], rollout_id="off")
    for rec in (wrong, off):
        details = rec.evidence["mutation"].details
        assert details["generated_on"] == "sandbox"
        assert rec.reward == host.reward and rec.components == host.components
        assert details["verdicts"] == host.evidence["mutation"].details["verdicts"]


def _descendants(pid: int) -> list[int]:
    import os

    parents = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as fh:
                    parents[int(p)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += [c for c, parent in parents.items() if parent == p]
    return out


@pytest.mark.docker
def test_the_generator_is_confined_without_network_or_host_privileges(docker_ready):
    import os
    import shutil

    if shutil.which("bwrap") is None:
        pytest.skip("no bubblewrap: the generator runs unconfined (documented)")
    with DockerSandbox(docker_ready) as sb:
        assert mutant_generator.generate(sb, {"pkg/m.py": ("def f(a):\n    return a\n", [2])})
        pool = mutant_generator._pool_for(sb)
        assert pool.argvs[0][0].endswith("bwrap") and pool.broken is None
        [server] = pool.idle
        python = [p for p in _descendants(server.proc.pid)
                  if b"mutmut_adapter" in open(f"/proc/{p}/cmdline", "rb").read()]
        assert python
        for ns in ("net", "user", "pid", "mnt"):
            assert os.readlink(f"/proc/{python[-1]}/ns/{ns}") != os.readlink(
                f"/proc/self/ns/{ns}"), ns


@pytest.mark.docker
def test_sampling_before_rendering_picks_what_select_mutants_picks(docker_ready):
    from proctor.suites import select_mutants

    numbers = ", ".join(str(i) for i in range(60))
    code = (f"def f(index):\n    if index == [{numbers}]:\n        return None\n"
            "    return index + 1\n")
    with DockerSandbox(docker_ready) as sb:
        full = mutant_generator.generate(sb, {"pkg/m.py": (code, [2, 4])})
        some = mutant_generator.generate(sb, {"pkg/m.py": (code, [2, 4])}, max_mutants=30,
                                         seed=7)
        # red4: 4,000 numbers rendered every mutant (quadratic, minutes) and ran the
        # step out of time. Sampled before rendering, the request is linear in the
        # statement (about 10 s here on a quiet machine, mostly libcst's parse), so the
        # check gets a timeout that only the quadratic path could exceed.
        big = ", ".join(str(i) for i in range(4000))
        huge = mutant_generator.generate(sb, {"pkg/m.py": (
            f"def f(index):\n    if index == [{big}]:\n        return None\n", [2])},
            max_mutants=30, seed=7, timeout=180.0)
    assert len(full["mutants"]) > 60 and len(some["mutants"]) == 30
    picked = select_mutants(full["mutants"], 30, 7)
    assert ({(m["line"], m["diff"]) for m in some["mutants"]}
            == {(m["line"], m["diff"]) for m in picked})
    assert huge is not None and len(huge["mutants"]) == 30


def test_a_clean_answer_is_kept_per_tools_and_request_and_a_failure_is_asked_again(
        monkeypatch):
    asked = []
    answer = {"files": {"a.py": "x = 1\n"}, "mutants": [{"name": "a.x__mutmut_1"}],
              "errors": []}

    class Pool:
        def __init__(self, origin):
            self.origin = origin

        def generate(self, files, timeout, max_mutants, seed, import_roots):
            asked.append((self.origin, files, seed))
            if seed == 13:
                return None
            got = json.loads(json.dumps(answer))
            if seed == 14:  # an answer that names an error (a memory limit, say)
                got["errors"] = ["a.py: MemoryError"]
            return got

    pools = {"a": Pool(("python", ["tools-a"])), "b": Pool(("python", ["tools-b"]))}
    monkeypatch.setattr(mutant_generator, "_pool_for", lambda sb: pools[sb])
    src = {"a.py": ("x = 0\n", [1])}
    first = mutant_generator.generate("a", src, seed=1)
    first["mutants"].append("what a caller did to its copy")
    assert mutant_generator.generate("a", src, seed=1) == answer and len(asked) == 1
    mutant_generator.generate("b", src, seed=1)  # other tools
    mutant_generator.generate("a", src, seed=2)  # another draw
    mutant_generator.generate("a", {"a.py": ("x = 0\n", [1, 2])}, seed=1)  # other lines
    mutant_generator.generate("a", src, seed=1, import_roots=["src"])
    assert len(asked) == 5
    assert mutant_generator.generate("a", src, seed=13) is None
    assert mutant_generator.generate("a", src, seed=13) is None
    assert mutant_generator.generate("a", src, seed=14)["errors"]
    assert mutant_generator.generate("a", src, seed=14)["errors"]
    assert len(asked) == 9  # nothing kept of a failure, nor of an answer naming an error
    # past the byte bound the least recently used goes
    monkeypatch.setattr(mutant_generator, "ANSWERS_MAX_BYTES", 2 * len(json.dumps(answer)))
    monkeypatch.setattr(mutant_generator, "_answers", OrderedDict())
    monkeypatch.setattr(mutant_generator, "_answers_bytes", 0)
    for seed in (1, 2, 1, 3):  # 1 used again before 3 came: 2 is the one to go
        mutant_generator.generate("a", src, seed=seed)
    asked.clear()
    for seed in (1, 3, 2):
        mutant_generator.generate("a", src, seed=seed)
    assert [seed for _, _, seed in asked] == [2]


def test_tools_that_cannot_be_found_are_not_looked_for_again(monkeypatch):
    # a failed copy of the image's libraries made a container on every rollout
    calls = []

    def no_tools(sb):
        calls.append(sb)
        return None

    monkeypatch.setattr(mutant_generator, "_image_site_packages", no_tools)
    monkeypatch.setattr(mutant_generator, "_pools", {})

    class Image:
        image_id = "sha256:none"

    src = {"pkg/m.py": ("def f(a):\n    return a\n", [2])}
    assert mutant_generator.generate(Image(), src) is None
    assert mutant_generator.generate(Image(), src) is None
    assert len(calls) == 1
    assert mutant_generator._pools["image:sha256:none"].broken


@pytest.mark.docker
def test_an_idle_generator_that_died_is_replaced_not_the_end_of_host_generation(
        docker_ready, monkeypatch):
    # a generator killed while idle (OOM killer, a signal to its group) made the next
    # request fail and, with it, host generation for the rest of the batch
    monkeypatch.setattr(mutant_generator, "_pools", {})
    src = {"pkg/m.py": ("def f(a):\n    return a + 1\n", [2])}
    with DockerSandbox(docker_ready) as sb:
        first = mutant_generator.generate(sb, src)
        pool = mutant_generator._pool_for(sb)
        [server] = pool.idle
        server.proc.kill()
        server.proc.wait()
        mutant_generator.forget_answers()  # asked of a process each time, not kept
        again = mutant_generator.generate(sb, src)
        assert again is not None and again["mutants"] == first["mutants"]
        [fresh] = pool.idle
        assert fresh is not server and fresh.alive
        # a server that dies under a request it had taken is replaced once, too
        fresh.proc.kill()
        mutant_generator.forget_answers()
        assert mutant_generator.generate(sb, src)["mutants"] == first["mutants"]
    mutant_generator.close_all()


@pytest.mark.docker
def test_a_warm_generator_outlives_the_threads_that_started_and_used_it(docker_ready,
                                                                        monkeypatch):
    # bubblewrap's --die-with-parent (PR_SET_PDEATHSIG) ends the process when the *thread*
    # that started it ends: each rollout's pool thread took its generator along, and the
    # next rollout waited for a new one (0.7 s on its critical path)
    monkeypatch.setattr(mutant_generator, "_pools", {})
    src = {"pkg/m.py": ("def f(a):\n    return a + 1\n", [2])}
    with DockerSandbox(docker_ready) as sb:
        mutant_generator.warm(sb)  # started in a thread of its own, which then ends
        pool = mutant_generator._pool_for(sb)
        with pool.lock:
            assert pool.ready.wait_for(lambda: pool.idle, mutant_generator.START_TIMEOUT_S)
        [server] = pool.idle
        with pytest.raises(subprocess.TimeoutExpired):
            server.proc.wait(timeout=1.0)
        got = []
        user = threading.Thread(target=lambda: got.append(mutant_generator.generate(sb, src)))
        user.start()
        user.join()
        assert [m["name"] for m in got[0]["mutants"]] == ["pkg.m.x_f__mutmut_1",
                                                          "pkg.m.x_f__mutmut_2"]
        assert pool.idle == [server]  # the warm one answered, and stays up
        with pytest.raises(subprocess.TimeoutExpired):
            server.proc.wait(timeout=1.0)
    mutant_generator.close_all()


def test_a_generator_that_could_not_start_is_tried_again_after_the_cool_down(tmp_path):
    # a start that timed out on a loaded machine disabled host generation for good
    starts = tmp_path / "starts"
    pool = mutant_generator._Pool([["sh", "-c", f"echo x >> {starts}"]])
    src = {"pkg/m.py": {"code": "x = 1\n", "lines": [1]}}
    assert pool.generate(src, 1.0) is None and pool.broken
    assert pool.generate(src, 1.0) is None  # within the cool-down: not started again
    assert starts.read_text().count("x") == 1
    pool.broken_at -= mutant_generator.BROKEN_RETRY_S + 1
    assert pool.generate(src, 1.0) is None
    assert starts.read_text().count("x") == 2


def test_tools_not_found_are_looked_for_again_after_the_cool_down(monkeypatch):
    calls = []
    monkeypatch.setattr(mutant_generator, "_image_site_packages",
                        lambda sb: calls.append(sb))
    monkeypatch.setattr(mutant_generator, "_pools", {})

    class Image:
        image_id = "sha256:none"

    src = {"pkg/m.py": ("def f(a):\n    return a\n", [2])}
    assert mutant_generator.generate(Image(), src) is None
    mutant_generator._pools["image:sha256:none"].broken_at -= (
        mutant_generator.BROKEN_RETRY_S + 1)
    assert mutant_generator.generate(Image(), src) is None
    assert len(calls) == 2


def test_a_spare_is_started_only_from_a_record_naming_our_own_generator(tmp_path,
                                                                      monkeypatch):
    """A spare runs only the generator its environment's last score started, and only what
    :func:`generator_process.argvs` would start first (our boot code, confined when
    bubblewrap is there, with this interpreter or a tools venv's python, libraries from the
    tools' caches), from a file of this user's alone that no one else may write."""
    import os
    import sys

    from proctor import cache_dirs

    record = tmp_path / "key.generator.json"
    monkeypatch.setattr(generator_process, "_record", record)
    site = str(cache_dirs.gen_tools() / "sha256-x" / "site-packages")
    ways = generator_process.argvs(sys.executable, [site])
    argv = ways[0]
    assert generator_process.recorded() is None  # nothing recorded
    generator_process.remember((sys.executable, [site]), argv)
    assert generator_process.recorded() == argv
    assert record.stat().st_mode & 0o777 == 0o600
    venv = cache_dirs.venvs() / "abc"
    evil = str(tmp_path / "evil" / "site-packages")
    bad = {
        "another boot": {"python": sys.executable, "path": [site],
                         "argv": [*argv[:-1], argv[-1] + "\nimport os\n"]},
        "library outside the caches": {
            "python": sys.executable, "path": [evil],
            "argv": generator_process.argvs(sys.executable, [evil])[0]},
        "a relative library path": {
            "python": sys.executable, "path": ["site-packages"],
            "argv": generator_process.argvs(sys.executable, ["site-packages"])[0]},
        "another interpreter": {
            "python": str(tmp_path / "bin" / "python"), "path": [site],
            "argv": generator_process.argvs(str(tmp_path / "bin" / "python"), [site])[0]},
        "a venv's other program": {
            "python": str(venv / "bin" / "pip"), "path": [site],
            "argv": generator_process.argvs(str(venv / "bin" / "pip"), [site])[0]},
        "no record": ["python3", "-c", "pass"],
    }
    if len(ways) > 1:  # bubblewrap is there: the unconfined way is never started ahead
        bad["the unconfined way"] = {"python": sys.executable, "path": [site],
                                     "argv": ways[1]}
    for why, data in bad.items():
        record.write_text(json.dumps(data))
        record.chmod(0o600)
        assert generator_process.recorded() is None, why
    record.write_text("{not json")
    assert generator_process.recorded() is None
    record.unlink()
    generator_process.remember((sys.executable, [site]), argv)
    record.chmod(0o620)  # others may write it: not trusted
    assert generator_process.recorded() is None
    record.chmod(0o600)
    link = tmp_path / "link.generator.json"
    link.symlink_to(record)
    monkeypatch.setattr(generator_process, "_record", link)
    assert generator_process.recorded() is None  # a link is not followed
    fifo = tmp_path / "fifo.generator.json"
    os.mkfifo(fifo, 0o600)
    monkeypatch.setattr(generator_process, "_record", fifo)
    assert generator_process.recorded() is None  # refused at once, not waited on
    generator_process.remember((sys.executable, [site]), argv)  # nor here
    monkeypatch.setattr(generator_process, "_record", record)
    if len(ways) > 1:  # a start that fell back to the unconfined way is not recorded
        record.unlink()
        generator_process.remember((sys.executable, [site]), ways[1])
        assert not record.exists()


def test_a_spare_that_dies_unused_is_not_started_again_at_once(monkeypatch):
    """A spare that cannot load its tools dies; the daemon does not start one every half
    second while idle, but after the cool-down, as a pool does."""
    import sys
    import time

    from proctor import cache_dirs

    monkeypatch.setattr(generator_process, "_record", None)  # put back after the test
    record = cache_dirs.daemon_logs() / "spare-test.generator.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    spares = generator_process.Spares(record)
    site = str(cache_dirs.gen_tools() / "no-such-image" / "site-packages")  # no mutmut
    generator_process.remember((sys.executable, [site]),
                               generator_process.argvs(sys.executable, [site])[0])
    # the daemon forks only single-threaded; this test's process may run other threads
    monkeypatch.setattr(generator_process.threading, "active_count", lambda: 1)
    try:
        spares.fill()
        assert len(spares) == 1
        [spare] = generator_process._spares.values()
        end = time.monotonic() + 30
        while spare.alive and time.monotonic() < end:
            time.sleep(0.05)
        assert not spare.alive
        spares.fill()  # found dead: dropped, and none started in its place
        assert len(spares) == 0
        spares.fill()
        assert len(spares) == 0
        spares.failed_at -= generator_process.BROKEN_RETRY_S  # the cool-down is over
        spares.fill()
        assert len(spares) == 1
    finally:
        spares.close()
        record.unlink()


@pytest.mark.local
def test_a_generator_started_early_is_the_one_the_score_takes_and_the_record_is_the_same(
        tmp_path, monkeypatch, toolz_task, toolz_build):
    """``proctor score`` starts, before its imports, the generator its environment's last
    score started (recorded by that score); the score's pool takes it, and nothing of the
    record changes."""
    patch = (toolz_build / "patches" / "partial.patch").read_bytes()
    monkeypatch.setattr(mutant_generator, "_pools", {})
    monkeypatch.setattr(generator_process, "_record", None)
    record = tmp_path / "key.generator.json"
    generator_process.start_early(record)
    assert generator_process._spares == {}  # nothing recorded yet: nothing started
    first = score(toolz_task, patch, sandbox="local")
    assert json.loads(record.read_text())["argv"]  # the generator it started
    mutant_generator.close_all()
    monkeypatch.setattr(mutant_generator, "_pools", {})  # as in a new process
    mutant_generator.forget_answers()
    generator_process.start_early(record)
    [spare] = generator_process._spares.values()
    assert spare.alive and spare.proc is not None  # this process's own child
    second = score(toolz_task, patch, sandbox="local")
    assert generator_process._spares == {}
    [pool] = mutant_generator._pools.values()
    assert pool.idle == [spare]  # taken, used, kept for the next rollout
    for rec in (first, second):
        assert rec.status == "scored" and rec.evidence["mutation"].details["generated_on"] \
            == "host"
    assert second.reward == first.reward and second.components == first.components
    assert second.evidence["mutation"].details["verdicts"] == \
        first.evidence["mutation"].details["verdicts"]
    mutant_generator.close_all()
    assert not spare.alive
