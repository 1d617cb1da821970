"""Run mutants against the trusted tests in one pytest session, inside the sandbox.

``python -I -B mutation_runner.py SPEC.json OUT``, as the sandbox user (SPEC ``-``: read
from stdin until its end; ``OUT.log`` gets the pytest session's own output). It loads
pytest and mutmut's trampoline, then waits for SPEC
(written by proctor/suites/mutation.py once the mutants are in the throw-away copy and the
killers are known; ``{"abort": why}`` ends it):
``root`` (rootdir, last on sys.path), ``pytest_args`` (ini, plugins, targets), ``killers``
(test ids allowed to kill, or null for every collected test), ``killer_files`` (files whose
every test may kill), ``mutants`` (``[{"name", "function"}]``), ``control`` (a mutant
name that selects no mutant: the original code must survive it), ``control_at`` (its
position among the mutants), ``workers``, ``timeout_factor``, ``timeout_constant`` (s),
``contention`` (>= 1), ``budget_s``, ``nonce``. Verdicts go to stdout, one JSON object a
line, each with ``"n": nonce`` (but the first, ``started``, printed before the spec).

1. Stats pass: every killer test runs once on the original code with mutmut's trampolines in
   ``"stats"`` mode, recording its duration and the functions it reaches. Only tests that
   pass here may kill.
2. One forked child per mutant (``workers`` at a time, each in its own process group):
   it activates the mutant and runs the tests covering its function, fastest first, stopping
   at the first failure (:func:`first_failure`, no pytest reports). Its verdict comes back
   on a pipe. Timeout per mutant:
   ``(timeout_factor * sum(covering durations) + timeout_constant) * contention`` seconds.

The control runs at position ``control_at`` of the queue (chosen at random by the
harness, so code cannot count its way to it). When it times out it runs once more, last,
with :data:`CONTROL_RETRY_SCALE` times its timeout: a load spike must not void the step,
while code that hangs under mutation testing hangs again (its first line then has
``"retrying": true``, the second ``"retried": true``). Every other mutant that timed out on
its first run is judged after the first pass: a timeout as before, or, when the control
needed its retry, by a run with the same longer timeout (else code that sleeps just past
the first timeout in every forked child turns every mutant into a "killed" timeout).

Verdicts (one JSON line each, ``{"mutant", "verdict", ...}``): ``killed``, ``timeout`` (the
child was killed at its timeout; counts as killed), ``survived``, ``no_tests`` (no passing
killer reaches the function; counts as survived), ``crashed`` (the child died without a
verdict: dropped) and ``not_run`` (the step's budget ran out: dropped). Lines before them:
``{"started": ...}`` (mutmut imported and configured), ``{"stats": ...}``; the control's
line has ``"control"`` instead of ``"mutant"``; the last line is ``{"done": ...}``.
"""

import json
import os
import select
import signal
import sys
import time

import pytest

harness_dir = os.path.dirname(os.path.abspath(__file__))
#: The control's second run (after a timeout) gets this many times its timeout.
CONTROL_RETRY_SCALE = 4.0


def resolve(function, covering):
    """The trampoline's own key for ``function`` (``module.x_func``): itself, or the one hit
    whose module differs only by a leading package path (``src.pkg.m`` vs ``pkg.m``, a
    layout the harness guessed wrong); the mutant is then activated under that module."""
    if function in covering:
        return function
    module, _, mangled = function.rpartition(".")
    hits = [k for k in covering if k.rpartition(".")[2] == mangled and (
        module.endswith("." + k.rpartition(".")[0]) or k.rpartition(".")[0].endswith(
            "." + module))]
    return hits[0] if len(hits) == 1 else function


def first_failure(items):
    """Run ``items`` in order (setup, call, teardown), stopping at the first that raises;
    return its id or None. What pytest's ``runtestprotocol`` does minus the reports: no
    failure representation is built (formatting a mutant's failure can take longer than the
    test), no hooks run. A skip is not a failure. Uses pytest 9's SetupState."""
    from _pytest.outcomes import Skipped

    state = items[0].session._setupstate if items else None
    for j, item in enumerate(items):
        nxt = items[j + 1] if j + 1 < len(items) else None
        if hasattr(item, "_request") and not item._request:
            item._initrequest()  # re-run of an item: what runtestprotocol does
        try:
            try:
                state.setup(item)
                item.runtest()
            except Skipped:
                pass
            state.teardown_exact(nxt)
        except Skipped:
            pass
        except BaseException:  # noqa: BLE001 - any exception, even SystemExit, kills
            return item.nodeid
    return None


class MutationSession:
    """pytest plugin that replaces the run loop (see the module docstring)."""

    def __init__(self, spec, adapter, out):
        self.spec, self.adapter, self.out = spec, adapter, out

    def emit(self, obj):
        self.out(obj)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        from _pytest.runner import runtestprotocol

        self.protocol = runtestprotocol
        allowed = self.spec.get("killers")
        allowed = None if allowed is None else set(allowed)
        files = set(self.spec.get("killer_files") or ())
        items = [i for i in session.items if allowed is None or i.nodeid in allowed
                 or i.nodeid.partition("::")[0] in files]
        covering, failed, t0 = self.stats_pass(items)
        self.emit({"stats": {"tests": len(items), "failed": failed, "collected":
                             len(session.items), "duration_s": round(time.monotonic() - t0, 3)}})
        queue = list(self.spec["mutants"])
        if self.spec.get("control"):
            at = min(max(int(self.spec.get("control_at", 0)), 0), len(queue))
            queue.insert(at, {"name": self.spec["control"], "function": self.spec["control"]
                              .rpartition("__mutmut_")[0], "control": True})
        self.run_mutants(queue, covering)
        return True

    def stats_pass(self, items):
        t0 = time.monotonic()
        self.adapter.activate("stats")
        self.adapter.take_hits()
        covering, failed = {}, []
        for idx, item in enumerate(items):
            nxt = items[idx + 1] if idx + 1 < len(items) else None
            start = time.perf_counter()
            reports = self.protocol(item, nextitem=nxt, log=False)
            duration = time.perf_counter() - start
            hits = self.adapter.take_hits()
            if not all(r.passed for r in reports):
                failed.append(item.nodeid)
                continue
            for fn in hits:
                covering.setdefault(fn, []).append((duration, idx, item))
        self.adapter.activate(None)
        for tests in covering.values():
            tests.sort(key=lambda t: (t[0], t[1]))
        return covering, failed, t0

    def run_mutants(self, queue, covering):
        spec = self.spec
        start = time.monotonic()
        budget_end = start + float(spec["budget_s"])
        running = {}  # read fd -> (pid, mutant, started, deadline, timeout_s)
        pending = list(queue)
        held = []  # mutants that timed out on their first run: judged once the control is
        extended = False  # the control needed its longer retry: so do they (red4)
        while pending or running or held:
            if not pending and not running:  # first pass done: judge the held ones now
                if extended:
                    pending = [dict(m, retry=True) for m, _, _ in held]
                else:
                    for mutant, elapsed, timeout in held:
                        self.verdict(mutant, "timeout", elapsed, timeout)
                held = []
                continue
            while pending and len(running) < int(spec["workers"]):
                mutant = pending.pop(0)
                key = resolve(mutant["function"], covering)
                tests = covering.get(key, [])
                if not tests:
                    self.verdict(mutant, "no_tests", 0.0)
                    continue
                if time.monotonic() >= budget_end:
                    self.verdict(mutant, "not_run", 0.0)
                    continue
                timeout = (float(spec["timeout_factor"]) * sum(t[0] for t in tests)
                           + float(spec["timeout_constant"])) * float(spec["contention"]) \
                    * (CONTROL_RETRY_SCALE if mutant.get("retry") else 1.0)
                name = key + mutant["name"][len(mutant["function"]):]
                fd, pid = self.fork(name, [t[2] for t in tests])
                now = time.monotonic()
                running[fd] = (pid, mutant, now, min(now + timeout, budget_end), timeout)
            if not running:
                continue
            wait = max(0.0, min(r[3] for r in running.values()) - time.monotonic())
            ready, _, _ = select.select(list(running), [], [], wait)
            for fd in ready:
                pid, mutant, started, _, timeout = running.pop(fd)
                data = os.read(fd, 4096).decode("utf-8", "replace")
                os.close(fd)
                os.waitpid(pid, 0)
                elapsed = time.monotonic() - started
                if data.startswith("K "):
                    self.verdict(mutant, "killed", elapsed, timeout, killer=data[2:])
                elif data == "S":
                    self.verdict(mutant, "survived", elapsed, timeout)
                else:
                    self.verdict(mutant, "crashed", elapsed, timeout)
            now = time.monotonic()
            for fd in [fd for fd, r in running.items() if r[3] <= now]:
                pid, mutant, started, _, timeout = running.pop(fd)
                self.kill(pid)
                os.close(fd)
                own = started + timeout <= now + 1e-3
                if own and mutant.get("control") and not mutant.get("retry"):
                    # A load spike, or code that senses mutation testing? Once more, last
                    # and with a longer timeout: only a second timeout kills the control.
                    self.verdict(mutant, "timeout", now - started, timeout, retrying=True)
                    pending.append(dict(mutant, retry=True))
                    extended = True
                    continue
                if own and not mutant.get("retry"):
                    # judged after the first pass: with the control's longer timeout when it
                    # needed it (else code sleeping just past the first timeout in every
                    # child makes every mutant a "killed" timeout and the control survive)
                    held.append((mutant, now - started, timeout))
                    continue
                self.verdict(mutant, "timeout" if own else "not_run", now - started, timeout)
        self.emit({"done": {"duration_s": round(time.monotonic() - start, 3)}})

    def fork(self, name, tests):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: never returns
            verdict = ""
            me = os.getpid()
            try:
                os.close(r)
                os.setpgid(0, 0)
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                self.adapter.activate(name)
                failed = first_failure(tests)
                verdict = "S" if failed is None else "K " + failed
                if os.getpid() == me:  # a fork of the code under test must not answer
                    os.write(w, verdict.encode("utf-8")[:4000])
            finally:
                os._exit(0)
        os.close(w)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass  # the child did it first (or is gone already)
        return r, pid

    @staticmethod
    def kill(pid):
        for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, 9)):
            try:
                target()
            except OSError:
                pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass

    def verdict(self, mutant, verdict, elapsed, timeout=None, killer=None, retrying=False):
        key = "control" if mutant.get("control") else "mutant"
        line = {key: mutant["name"], "verdict": verdict, "duration_s": round(elapsed, 4),
                "timeout_s": None if timeout is None else round(timeout, 3), "killer": killer}
        if retrying or mutant.get("retry"):
            line["retrying" if retrying else "retried"] = True
        self.emit(line)


def wait_for_spec(path, limit_s=600.0):
    """The spec, once the harness has written it (generation runs meanwhile); ``-``: the
    whole of stdin (the harness closes it after the spec; the outer timeout bounds it)."""
    if path == "-":
        return json.load(sys.stdin)
    end = time.monotonic() + limit_s
    while True:
        try:
            with open(path, encoding="utf-8") as fh:
                return json.load(fh)
        except (OSError, ValueError):  # not there yet, or still being written
            if time.monotonic() > end:
                raise SystemExit(f"no spec at {path} after {limit_s:g} s") from None
            time.sleep(0.002)


def _writer(fd, nonce):
    """``write(obj)``: ``obj`` plus the spec's ``nonce`` (``"n"``) as one JSON line on
    ``fd``, the command's own stdout, which only its reader sees afterwards: a line the code
    under test adds lacks the nonce (red4: it appended "killed" lines to a file), and what
    was written cannot be changed."""

    def write(obj):
        data = (json.dumps(dict(obj, n=nonce)) + "\n").encode()
        while data:
            data = data[os.write(fd, data):]

    return write


def main(spec_path, out_path):
    sys.path.insert(0, harness_dir)
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    for var in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "MUTANT_UNDER_TEST"):
        os.environ.pop(var, None)
    import mutmut_adapter

    mutmut_adapter.use_neutral_config()
    sys.stdout.write(json.dumps({"started": {"pid": os.getpid()}}) + "\n")
    sys.stdout.flush()
    spec = wait_for_spec(spec_path)
    if "abort" in spec:
        return 0
    sys.path.append(spec["root"])
    os.chdir(spec["root"])
    out = _writer(os.dup(1), str(spec.get("nonce", "")))
    log = f"{out_path}.log"
    with open(log, "wb") as fh:  # the session's own output goes to a side file
        os.dup2(fh.fileno(), 1)
        os.dup2(fh.fileno(), 2)
    session = MutationSession(spec, mutmut_adapter, out)
    code = pytest.main(spec["pytest_args"], plugins=[session])
    with open(log, "rb") as fh:  # the session's output tail, last
        out({"output": fh.read()[-4000:].decode("utf-8", "replace")})
    return int(code)


if __name__ == "__main__":
    # os._exit: a thread or an atexit handler the tests left behind cannot keep it alive
    status = 3
    try:
        status = main(sys.argv[1], sys.argv[2])
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - the code under test may have closed it
                pass
        os._exit(status)
