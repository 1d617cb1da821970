"""Proctor against the minimal peer, per patch (issue 26: every check for the price of a bare
``docker run``).

    python bench/peer.py                    # the toolz example
    python bench/peer.py --realrepos        # and every task of bench/realrepo_tasks.py
    python bench/peer.py --task DIR --repeats 5

The minimal peer is what SkyRL and the SWE-bench harness do per patch, written honestly:
a fresh ``docker run --rm -i --network none`` of the same image Proctor scores the task in,
the repository (with the patch and the hidden tests) piped in as a tar made once per task,
``git apply``, the public pytest run, the hidden tests laid in at their upstream paths, the
hidden pytest run; the reward is the exit code. No baseline, no tamper checks, no mutation, no
static analysis.

Timed side by side in one run, each the median of ``--repeats`` (after one warm-up each):

- **bare**: the same two pytest runs in a container that already ran them once (the physical
  limit: the tests themselves), timed inside the container;
- **peer**: the wall time of the peer's ``docker run``, tar included;
- **proctor CLI**: ``python -m proctor score TASK reference.patch --json`` (baseline cached),
  process start included;
- **proctor CLI daemon**: the same command handed to a CLI daemon (``proctor daemon``: a
  process forked from one with every module imported), client start included;
- **proctor in-process**: ``proctor.score(task, patch)`` in this process;
- **proctor warm**: the same on warm sandboxes (:mod:`proctor.sandbox.warm_pool`), made
  ahead as a batch or ``proctor serve`` keeps them;
- **proctor from source**: in-process with the task's compiled files off
  (``PROCTOR_BYTECODE=0``, :mod:`proctor.suites.bytecode`): every run compiles the
  repository and rewrites its test modules from source.

Prints the seconds and the ratios the issue's goal is read from: Proctor over the peer
(goal <= 1.0) and over bare.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proctor import load_task, score
from proctor.sandbox import warm_counts, warm_sandboxes, warm_waiting
from proctor.suites import BYTECODE_ENV, mutant_generator

VENV_PATH = "/opt/proctor/venv/bin:/usr/local/bin:/usr/bin:/bin"
WORK = "/tmp/peer"


def _repo_tar(task, patch: bytes) -> bytes:
    """The repository, the patch at ``.peer/patch.diff`` and the hidden tests under
    ``.peer/hidden/``, as one tar (made once per task and patch, as a peer would keep it)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(task.repo, arcname=".")
        tar.add(task.hidden, arcname=".peer/hidden")
        info = tarfile.TarInfo(".peer/patch.diff")
        info.size = len(patch)
        tar.addfile(info, io.BytesIO(patch))
    return buf.getvalue()


def _script(task, repeat: bool) -> str:
    """The peer's shell script: apply, public run, hidden tests in place, hidden run; exit
    status 0 only when both runs pass. ``repeat``: run the tests twice and print the second
    run's seconds (the bare measure)."""
    public = " ".join(task.config.tests.public)
    hidden = " ".join(task.hidden_files)
    path = ":".join([WORK, *task.pythonpath_in(WORK)])
    install = (f"python -m pip install -q --no-index --no-deps --no-build-isolation "
               f"--target {WORK}/.peer/site . && " if task.config.install else "")
    site = f":{WORK}/.peer/site" if task.config.install else ""
    tests = (f"PYTHONPATH={path}{site} python -m pytest -q -p no:cacheprovider {public} "
             f">/dev/null 2>&1; a=$?; PYTHONPATH={path}{site} python -m pytest -q "
             f"-p no:cacheprovider {hidden} >/dev/null 2>&1; b=$?")
    head = (f"mkdir -p {WORK} && cd {WORK} && tar -xf - && git apply .peer/patch.diff && "
            f"cp -r .peer/hidden/. . && {install}")
    if not repeat:
        return head + f"{{ {tests}; exit $((a | b)); }}"
    return (head + f"{{ {tests}; s=$(date +%s.%N); {tests}; e=$(date +%s.%N); "
            f"echo BARE $s $e $a $b; }}")


def _docker_run(image: str, script: str, stdin: bytes) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "run", "--rm", "-i", "--network", "none",
                           "-e", f"PATH={VENV_PATH}", image, "sh", "-c", script],
                          input=stdin, capture_output=True, timeout=900)


def bare_s(task, image: str, stdin: bytes) -> float:
    """Seconds of the second of two runs of both suites in one container."""
    done = _docker_run(image, _script(task, repeat=True), stdin)
    line = done.stdout.decode().strip().splitlines()[-1].split()
    if line[0] != "BARE" or line[3:] != ["0", "0"]:
        raise RuntimeError(f"{task.id}: bare run failed: {done.stdout[-2000:]!r} "
                           f"{done.stderr[-2000:]!r}")
    return float(line[2]) - float(line[1])


def peer_s(task, image: str, stdin: bytes) -> float:
    """Wall seconds of the peer's fresh container for the patch (its reward must be 1)."""
    t0 = time.monotonic()
    done = _docker_run(image, _script(task, repeat=False), stdin)
    secs = time.monotonic() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{task.id}: the peer's reward is 0 for the reference: "
                           f"{done.stderr[-2000:]!r}")
    return secs


def cli_s(task_dir: Path, patch_file: Path, daemon: bool = False) -> float:
    """Wall seconds of ``proctor score --json`` in a new process (it has no result cache:
    every call scores); ``daemon``: handed to the running CLI daemon (:func:`cli_daemon`),
    else on its own (``PROCTOR_DAEMON=0``)."""
    env = {**os.environ, "PROCTOR_DAEMON": "1" if daemon else "0"}
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "proctor", "score", str(task_dir),
                           str(patch_file), "--json"], capture_output=True, cwd=ROOT,
                          timeout=900, env=env)
    secs = time.monotonic() - t0
    if done.returncode != 0:
        raise RuntimeError(f"proctor score exited {done.returncode}: {done.stderr[-2000:]!r}")
    return secs


@contextlib.contextmanager
def cli_daemon():
    """A CLI daemon (``proctor daemon run``) for the CLI runs of this benchmark, started the
    way they start (``python -m proctor`` in the repository root: the same key), stopped at
    the end. Yields a function that returns how many commands it ran."""
    proc = subprocess.Popen([sys.executable, "-m", "proctor", "daemon", "run", "--idle", "600"],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if "serving on" not in (proc.stdout.readline() or ""):
        raise RuntimeError("the CLI daemon did not start")

    def served() -> int:
        done = subprocess.run([sys.executable, "-m", "proctor", "daemon", "status"], cwd=ROOT,
                              capture_output=True, text=True)
        return int(done.stdout.split(":")[1].split()[0]) if done.returncode == 0 else -1

    try:
        yield served
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def in_process_s(task, patch: bytes) -> float:
    """Wall seconds of ``proctor.score`` in this process, its mutants made anew (as a
    patch not scored before has them)."""
    mutant_generator.forget_answers()
    t0 = time.monotonic()
    rec = score(task, patch)
    secs = time.monotonic() - t0
    if rec.status != "scored":
        raise RuntimeError(f"{task.id}: {rec.error}")
    return secs


def warm_s(task, patch: bytes) -> float:
    """Wall seconds of ``proctor.score`` in this process on warm sandboxes (made ahead, as
    a batch or ``proctor serve`` keeps them): the pool is given time to hold two first."""
    with warm_sandboxes(2):
        end = time.monotonic() + 120
        while warm_waiting() < 2 and time.monotonic() < end:
            if warm_counts()["missed"] == 0:
                score(task, patch)  # the first take makes the pool, and fills it
            time.sleep(0.02)
        return in_process_s(task, patch)


def from_source_s(task, patch: bytes) -> float:
    """:func:`in_process_s` with the task's compiled files off (``PROCTOR_BYTECODE=0``)."""
    before = os.environ.get(BYTECODE_ENV)
    os.environ[BYTECODE_ENV] = "0"
    try:
        return in_process_s(task, patch)
    finally:
        if before is None:
            del os.environ[BYTECODE_ENV]
        else:
            os.environ[BYTECODE_ENV] = before


def measure(task_dir: Path, repeats: int) -> dict[str, float]:
    """Median seconds of each way for ``task_dir``'s reference patch (one warm-up each)."""
    task = load_task(task_dir)
    patch = task.reference_patch.read_bytes()
    rec = score(task, patch)  # computes and caches the baseline; names the image
    if rec.status != "scored" or not rec.env.image:
        raise RuntimeError(f"{task.id}: {rec.status}: {rec.error}")
    image = rec.env.image
    stdin = _repo_tar(task, patch)
    ways = {
        "bare": lambda: bare_s(task, image, stdin),
        "peer": lambda: peer_s(task, image, stdin),
        "proctor CLI": lambda: cli_s(task_dir, task.reference_patch),
        "proctor CLI daemon": lambda: cli_s(task_dir, task.reference_patch, daemon=True),
        "proctor in-process": lambda: in_process_s(task, patch),
        "proctor warm": lambda: warm_s(task, patch),
        "proctor from source": lambda: from_source_s(task, patch),
    }
    times: dict[str, list[float]] = {k: [] for k in ways}
    with cli_daemon() as served:
        for fn in ways.values():
            fn()  # warm-up
        for _ in range(repeats):  # interleaved, so a noisy moment hits every way alike
            for k, fn in ways.items():
                times[k].append(fn())
        if served() != repeats + 1:  # else the daemon column would time the plain CLI
            raise RuntimeError(f"the CLI daemon ran {served()} scores, not {repeats + 1}")
    return {k: statistics.median(v) for k, v in times.items()}


def _tasks(args) -> list[tuple[str, Path]]:
    if args.task:
        return [(d.name, d) for d in args.task]
    made = subprocess.run([sys.executable, str(ROOT / "examples/toolz/make_task.py")],
                          capture_output=True, text=True, check=True)
    out = [("toolz example", Path(made.stdout.strip().splitlines()[-1]))]
    if args.realrepos:
        from bench.realrepo_tasks import TASKS, build_task

        cache = Path(os.environ.get("PROCTOR_CACHE_DIR", ROOT / "bench/.cache"))
        out += [(name, build_task(name, cache / "realrepo-tasks" / name)) for name in TASKS]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", type=Path, action="append", help="a task directory (repeatable)")
    ap.add_argument("--realrepos", action="store_true",
                    help="also every task of bench/realrepo_tasks.py")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(f"{'task':18s} {'bare':>7s} {'peer':>7s} {'CLI':>7s} {'daemon':>7s} {'in-proc':>7s} "
          f"{'warm':>7s}   {'CLI/peer':>8s} {'dmn/peer':>8s} {'in/peer':>8s} {'warm/peer':>9s} "
          f"{'peer/bare':>9s} {'CLI/bare':>8s} {'source':>7s} {'in/source':>9s}")
    for name, task_dir in _tasks(args):
        try:
            m = measure(task_dir, args.repeats)
        except Exception as exc:  # report and go on with the next task
            print(f"{name:18s} {type(exc).__name__}: {exc}", flush=True)
            continue
        b, p, c, i = m["bare"], m["peer"], m["proctor CLI"], m["proctor in-process"]
        w, d, src = m["proctor warm"], m["proctor CLI daemon"], m["proctor from source"]
        print(f"{name:18s} {b:6.2f}s {p:6.2f}s {c:6.2f}s {d:6.2f}s {i:6.2f}s {w:6.2f}s   "
              f"{c / p:7.2f}x {d / p:7.2f}x {i / p:7.2f}x {w / p:8.2f}x {p / b:8.2f}x "
              f"{c / b:7.2f}x {src:6.2f}s {i / src:8.2f}x", flush=True)
    print("goal (issue 26): Proctor's per-patch time at most the peer's (CLI/peer <= 1.0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
