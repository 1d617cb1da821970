"""Run mutants against the trusted tests in one pytest session, inside the sandbox.

``python -I -B mutation_runner.py SPEC.json``, as the sandbox user (SPEC ``-``: the
first line of stdin; the pytest session's own output is drained by a keeper process that
holds only its tail, see :func:`keep_output_tail`). It loads pytest and
mutmut's trampoline, then waits for SPEC (written by proctor/suites/mutation.py once the
mutants are in the throw-away copy; ``{"abort": why}`` ends it):
``root`` (rootdir, on sys.path after the harness and libraries), ``pythonpath`` (the
task's, absolute, after ``root``), ``pytest_args`` (ini, plugins, targets), ``killers``
(test ids allowed to kill, or null for every collected test but ``stats_skip`` and
``exclude``), ``killers_later`` (the killers come on stdin's second line, see
:meth:`MutationSession.speculate`), ``killer_files`` (files whose every test may kill),
``mutants`` (``[{"name", "function"}]``), ``control`` (a mutant name that selects no
mutant: the original code must survive it), ``control_at`` (its position among the
mutants), ``workers``, ``timeout_factor``, ``timeout_constant`` (s), ``contention``
(>= 1), ``budget_s``, ``nonce``. Once read, stdin is /dev/null to the tests (the spec's
pipe moves to another descriptor). Verdicts go to stdout, one JSON object a line, each
with ``"n": nonce`` (but the first, ``started``, printed before the spec).

1. Stats pass: every killer test runs once on the original code with mutmut's trampolines in
   ``"stats"`` mode, recording its duration and the functions it reaches. Only tests that
   pass here may kill.
   The stats pass runs in a forked child: nothing the tests leave behind reaches the
   mutants (a test that deletes a module attribute, a cache the tests fill).
2. One forked child per mutant (``workers`` at a time, each in its own process group),
   forked from the runner as collection left it: it activates the mutant and runs the tests
   covering its function in collection order (the order the suite passes in), stopping at
   the first failure (:func:`first_failure`, no pytest reports). Its verdict comes back
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
A control killed, crashed or timed out on its retry decides the step (the harness scores it
0.0 whatever else is judged): the runner stops there, the children still running killed
and no other verdict written (:func:`settles`).

Verdicts (one JSON line each, ``{"mutant", "verdict", ...}``): ``killed``, ``timeout`` (the
child was killed at its timeout; counts as killed), ``survived``, ``no_tests`` (no passing
killer reaches the function; counts as survived), ``crashed`` (the child died without a
verdict: dropped) and ``not_run`` (the step's budget ran out: dropped). Lines before them:
``{"started": ...}`` (mutmut imported and configured), ``{"stats": ...}`` (killer tests,
their failures, seconds of the stats pass, ``startup_s`` from the runner's start to its
spec, ``session_start_s`` from the spec to the first test); the control's
line has ``"control"`` instead of ``"mutant"``; the last line is ``{"done": ...}``.
"""

import time

T_START = time.monotonic()  # before pytest's import: the runner's start-up is measured

import fcntl  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

harness_dir = os.path.dirname(os.path.abspath(__file__))
#: The control's second run (after a timeout) gets this many times its timeout.
CONTROL_RETRY_SCALE = 4.0
#: Bytes of the session's own output (pytest's, and the tests' prints under ``-s``) kept
#: for the runner's last line; below PIPE_BUF, so the keeper's one write never blocks.
OUTPUT_TAIL = 4000
#: Seconds the runner waits at its end for the keeper to drain the output pipe (a process
#: the tests left behind may hold it open: the keeper is then told to stop).
KEEPER_WAIT_S = 0.5


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


class _FailedReports:
    """Plugin seeing the only reports made while :func:`first_failure` runs: those of
    subtests (``unittest.TestCase.subTest`` and pytest's ``subtests`` fixture), which fail
    without the test function raising."""

    def __init__(self):
        self.failed = False

    def pytest_runtest_logreport(self, report):
        if report.failed:
            self.failed = True


def _unittest_failed(item):
    """True when a ``unittest.TestCase`` item recorded an error, a failure or an unexpected
    success: pytest's ``TestCaseFunction.runtest`` does not raise for them, it keeps them in
    ``item._excinfo`` for its makereport hook (``_pytest/unittest.py``). Skips and expected
    failures are not failures. The list is emptied (the item may run again)."""
    from _pytest.outcomes import Skipped, XFailed

    infos = item.__dict__.pop("_excinfo", None) or []
    return any(not isinstance(e.value, (Skipped, XFailed)) for e in infos)


def _pipe():
    """``os.pipe()`` with both ends above the standard descriptors. Code under test that
    closed fd 1 and 2 in this process (at import, during collection) leaves them free, and
    a plain pipe would take them: a mutant child's ``dup2`` of /dev/null onto 0-2 would
    then replace its own verdict pipe, and every mutant, the control too, would come back
    ``crashed`` (a measurement the patch switched off)."""
    return tuple(_above_std(fd) for fd in os.pipe())


def _above_std(fd):
    if fd > 2:
        return fd
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 3)
    os.close(fd)
    return moved


def _read_exactly(fd, n):
    """Up to ``n`` bytes from ``fd``: fewer only when the writer closed it first."""
    out = b""
    while len(out) < n:
        chunk = os.read(fd, min(n - len(out), 1 << 20))
        if not chunk:
            break
        out += chunk
    return out


def first_failure(items):
    """Run ``items`` in order (setup, call, teardown), stopping at the first that fails;
    return its id or None. What pytest's ``runtestprotocol`` does minus the reports: no
    failure representation is built (formatting a mutant's failure can take longer than the
    test), no hooks run. A test fails when a phase raises (a skip is not a failure), when
    it is a ``unittest.TestCase`` test that recorded a failure (:func:`_unittest_failed`)
    or when one of its subtests failed. Uses pytest 9's SetupState."""
    from _pytest.outcomes import Skipped

    if not items:
        return None
    state = items[0].session._setupstate
    subtests = _FailedReports()
    items[0].config.pluginmanager.register(subtests, "proctor-mutant-subtests")
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
            failed = _unittest_failed(item) or subtests.failed
            state.teardown_exact(nxt)
        except Skipped:
            continue
        except BaseException:  # noqa: BLE001 - any exception, even SystemExit, kills
            return item.nodeid
        if failed or _unittest_failed(item):
            return item.nodeid
    return None


class MutationSession:
    """pytest plugin that replaces the run loop (see the module docstring)."""

    def __init__(self, spec, adapter, out):
        self.spec, self.adapter, self.out = spec, adapter, out
        self.spec_at = T_START  # when the spec arrived (set by main)
        self.settled = False  # the control's verdict decided the step (see settles)

    def emit(self, obj):
        self.out(obj)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        from _pytest.runner import runtestprotocol

        self.protocol = runtestprotocol
        allowed = self.spec.get("killers")
        allowed = None if allowed is None else set(allowed)
        files = set(self.spec.get("killer_files") or ())
        left_out = set(self.spec.get("stats_skip") or ()) | set(self.spec.get("exclude") or ())
        items = [i for i in session.items
                 if (allowed is None and i.nodeid not in left_out) or (
                     allowed is not None and i.nodeid in allowed)
                 or i.nodeid.partition("::")[0] in files]
        t_loop = time.monotonic()
        final = None
        if self.spec.get("killers_later"):
            stats, final = self.stats_or_killers(items)
            if final is not None:  # the killers came first: the stats pass over them only
                if "abort" in final:
                    return True
                may_kill = self.killer_filter(final)
                items = [i for i in items if may_kill(i.nodeid)]
                stats = self.stats_pass(items)
        else:
            stats = self.stats_pass(items)
        if stats is None:  # the stats child died: no verdict can be trusted
            return True
        covering, failed, t0 = stats
        self.emit({"stats": {"tests": len(items), "failed": failed, "collected":
                             len(session.items), "duration_s": round(time.monotonic() - t0, 3),
                             "startup_s": round(self.spec_at - T_START, 3),
                             "session_start_s": round(t_loop - self.spec_at, 3),
                             "speculative": bool(self.spec.get("killers_later"))
                             and final is None}})
        queue = list(self.spec["mutants"])
        if self.spec.get("control"):
            at = min(max(int(self.spec.get("control_at", 0)), 0), len(queue))
            queue.insert(at, {"name": self.spec["control"], "function": self.spec["control"]
                              .rpartition("__mutmut_")[0], "control": True})
        if self.spec.get("killers_later") and final is None:
            self.speculate(queue, covering)
        else:
            budget = (final or self.spec).get("budget_s", 0)
            self.run_mutants(queue, covering, float(budget))
        return True

    def killer_filter(self, final):
        """``may_kill(test id)``: the killers of the spec's second line, or a test of an
        agent's killer file."""
        trusted = set(final.get("killers") or ())
        files = set(self.spec.get("killer_files") or ())
        return lambda test_id: test_id in trusted or test_id.partition("::")[0] in files

    def stats_or_killers(self, items):
        """The stats pass over ``items`` (every test but the ones the spec leaves out: the
        killers are not known yet) racing the spec's second line: (stats, None) when the
        stats pass ended first, else (None, the second line) with the stats child killed
        (a test that hangs, the code under test's failure, must not hold the step up: the
        suites' verdicts leave it out)."""
        t0 = time.monotonic()
        pid, r = self._start_stats(items)
        spec_fd = _SPEC_INPUT[0] if _SPEC_INPUT else 0
        ready, _, _ = select.select([r, spec_fd], [], [])
        if r in ready:
            return self._finish_stats(pid, r, items, t0), None
        os.close(r)
        self.kill(pid)
        return None, read_spec_line()

    def speculate(self, queue, covering):
        """Judge every mutant before the harness knows which tests may kill (the suites'
        verdicts), with every test that passed here; then read them (the spec's second line:
        ``{"killers": [...], "budget_s": S}`` or ``{"abort": why}``) and keep a verdict only
        when it stands with them: survived (fewer killers cannot kill it) or killed by one
        of them. The others run again with only them. What is emitted is the same verdicts
        a run with the killers known from the start gives, sooner."""
        first = {}
        emit, self.emit = self.emit, lambda obj: first.__setitem__(
            obj.get("mutant") or obj.get("control") or "", obj)
        try:  # every verdict may be redone with the killers: none settles the step yet
            self.run_mutants(queue, covering, float(self.spec["budget_s"]), settle=False)
        finally:
            self.emit = emit
        final = read_spec_line()
        if "abort" in final:
            return
        may_kill = self.killer_filter(final)
        redo = []
        settled = False
        for mutant in queue:
            line = first.get(mutant["name"])
            if line is not None and not line.get("retrying") and (
                    line["verdict"] in ("survived", "no_tests")
                    or line["verdict"] == "killed" and may_kill(line.get("killer") or "")):
                self.emit(line)
                settled = settled or settles(mutant, line["verdict"])
            else:
                redo.append(mutant)
        if settled:  # the control killed by a killer: the step is decided
            self.emit({"done": first.get("", {}).get("done", {"duration_s": 0.0})})
            return
        kept = {fn: [t for t in tests if may_kill(t[2].nodeid)]
                for fn, tests in covering.items()}
        self.run_mutants(redo, {fn: t for fn, t in kept.items() if t},
                         float(final.get("budget_s", 0)))

    def stats_pass(self, items):
        """(function -> [(duration, index, item)] in collection order, failed test ids,
        start time). Runs in a forked child, so what the tests leave behind (a module
        attribute deleted, a cache filled, a fixture's state) stays in that child: every
        mutant child forks from this process as collection left it, as a fresh session
        would run its tests. None when the child died without a result (the code under
        test ended it)."""
        t0 = time.monotonic()
        pid, r = self._start_stats(items)
        return self._finish_stats(pid, r, items, t0)

    def _start_stats(self, items):
        """Fork the stats child; (its pid, the read end of its result pipe)."""
        r, w = _pipe()
        pid = os.fork()
        if pid == 0:  # the stats child: never returns
            me = os.getpid()
            try:
                os.close(r)
                _close_spec_input()
                os.setpgid(0, 0)
                data = json.dumps(self._stats_in_this_process(items)).encode()
                if os.getpid() == me:  # a fork of the code under test must not answer
                    data = len(data).to_bytes(8, "big") + data
                    while data:
                        data = data[os.write(w, data):]
            finally:
                os._exit(0)
        os.close(w)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass  # the child did it first (or is gone already)
        return pid, r

    def _finish_stats(self, pid, r, items, t0):
        """The stats child's result (see :meth:`stats_pass`); the child is reaped."""
        # length first: a process the tests forked may hold the pipe open past the end
        head = _read_exactly(r, 8)
        body = _read_exactly(r, int.from_bytes(head, "big")) if len(head) == 8 else b""
        os.close(r)
        self.kill(pid)  # reaps it; kills what it left in its process group
        try:
            hits, failed = json.loads(body)
        except ValueError:
            return None
        covering = {fn: [(d, i, items[i]) for d, i in sorted(tests, key=lambda t: t[1])]
                    for fn, tests in hits.items()}
        return covering, failed, t0

    def _stats_in_this_process(self, items):
        """([function -> [[duration, index], ...]], failed test ids) of one run of
        ``items`` on the original code with the trampolines recording hits."""
        self.adapter.activate("stats")
        self.adapter.take_hits()
        covering, failed = {}, []
        subtests = _FailedReports()  # a test whose subtest fails here must not kill either
        if items:
            items[0].config.pluginmanager.register(subtests, "proctor-stats-subtests")
        for idx, item in enumerate(items):
            nxt = items[idx + 1] if idx + 1 < len(items) else None
            subtests.failed = False
            start = time.perf_counter()
            reports = self.protocol(item, nextitem=nxt, log=False)
            duration = time.perf_counter() - start
            hits = self.adapter.take_hits()
            if subtests.failed or not all(rep.passed for rep in reports):
                failed.append(item.nodeid)
                continue
            for fn in hits:
                covering.setdefault(fn, []).append([duration, idx])
        return covering, failed

    def run_mutants(self, queue, covering, budget_s, settle=True):  # noqa: C901
        """Judge ``queue``'s mutants; ``settle``: stop once the control's verdict decides
        the step (:func:`settles`), the children still running killed unjudged."""
        start = time.monotonic()
        budget_end = start + budget_s
        running = {}  # read fd -> (pid, mutant, started, deadline, timeout_s)
        pending = list(queue)
        held = []  # mutants that timed out on their first run: judged once the control is
        extended = False  # the control needed its longer retry: so do they
        self.settled = False
        while pending or running or held:
            if settle and self.settled:  # the step's result is the control's: 0.0
                for fd, (pid, *_rest) in running.items():
                    self.kill(pid)
                    os.close(fd)
                break
            if not pending and not running:  # first pass done: judge the held ones now
                if extended:
                    pending = [dict(m, retry=True) for m, _, _ in held]
                else:
                    for mutant, elapsed, timeout in held:
                        self.verdict(mutant, "timeout", elapsed, timeout)
                held = []
                continue
            while pending and len(running) < int(self.spec["workers"]):
                self.start_mutant(pending.pop(0), covering, running, budget_end)
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

    def start_mutant(self, mutant, covering, running, budget_end):
        """Fork ``mutant``'s child into ``running`` (read fd -> (pid, mutant, started,
        deadline, timeout_s)), or write its verdict at once: ``no_tests`` when no test
        covers its function, ``not_run`` past ``budget_end``."""
        spec = self.spec
        key = resolve(mutant["function"], covering)
        tests = covering.get(key, [])
        if not tests:
            self.verdict(mutant, "no_tests", 0.0)
            return
        if time.monotonic() >= budget_end:
            self.verdict(mutant, "not_run", 0.0)
            return
        timeout = (float(spec["timeout_factor"]) * sum(t[0] for t in tests)
                   + float(spec["timeout_constant"])) * float(spec["contention"]) \
            * (CONTROL_RETRY_SCALE if mutant.get("retry") else 1.0)
        name = key + mutant["name"][len(mutant["function"]):]
        fd, pid = self.fork(name, [t[2] for t in tests])
        now = time.monotonic()
        running[fd] = (pid, mutant, now, min(now + timeout, budget_end), timeout)

    def fork(self, name, tests):
        r, w = _pipe()
        pid = os.fork()
        if pid == 0:  # child: never returns
            verdict = ""
            me = os.getpid()
            try:
                os.close(r)
                _close_spec_input()
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
        self.settled = self.settled or settles(mutant, verdict)
        self.emit(line)


def settles(mutant, verdict):
    """Whether this verdict decides the step: the control (the original code) killed,
    crashed, or timed out on its longer retry. The harness scores the step 0.0 then,
    whatever the other mutants' verdicts, so none is judged after it."""
    return bool(mutant.get("control")) and (
        verdict in ("killed", "crashed") or verdict == "timeout" and bool(mutant.get("retry")))


_SPEC_INPUT = []  # the harness's spec pipe, once moved off stdin


def read_spec_line():
    """One JSON line of the harness's input (it writes each when ready; the outer timeout
    bounds the wait); ``{"abort": ...}`` at the end of the input. Reads byte by byte: the
    pipe may hold nothing more yet, and nothing past the line is taken."""
    fd = _SPEC_INPUT[0] if _SPEC_INPUT else 0
    line = bytearray()
    while not line.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            break
        line += chunk
    if not line.strip():
        return {"abort": "the harness closed the spec's input"}
    return json.loads(line)


def _close_spec_input():
    """In a forked child: the spec's pipe is the runner's alone."""
    while _SPEC_INPUT:
        os.close(_SPEC_INPUT.pop())


def _hide_spec_input():
    """Move the spec's pipe off stdin (a test that reads stdin, honest or not, must not
    take the spec's second line: it reads an empty input, as in the suites' runs)."""
    _SPEC_INPUT.append(os.dup(0))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(0, encoding="utf-8", closefd=False)


def _close_fds_except(keep):
    """Close every descriptor above 2 but those in ``keep``."""
    lo = 3
    for fd in sorted(k for k in keep if k >= 3):
        os.closerange(lo, fd)
        lo = fd + 1
    os.closerange(lo, os.sysconf("SC_OPEN_MAX"))


def keep_output_tail():
    """Point fds 1 and 2 (and ``sys.stdout``/``sys.stderr``) at a pipe that a forked keeper
    drains, holding only its last :data:`OUTPUT_TAIL` bytes. The session's own output has
    no bound (a test may print gigabytes under ``-s``): a side file on the sandbox's sized
    ``/proctor/out`` would fill up and fail the tests that print, in the stats pass, by how
    much the passes before wrote, so the same patch would lose its killers by timing.
    Returns ``(pid, fd)``, the keeper and the read end its tail arrives on, for
    :func:`output_tail`. The keeper holds no other descriptor of the runner (the verdict
    channel, the spec's pipe), so it never keeps the command's output open."""
    out_r, out_w = _pipe()
    tail_r, tail_w = _pipe()
    pid = os.fork()
    if pid == 0:  # the keeper: never returns
        try:
            tail = bytearray()

            def give(*_):
                os.write(tail_w, bytes(tail[-OUTPUT_TAIL:]))
                os._exit(0)

            signal.signal(signal.SIGTERM, give)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            _close_fds_except({out_r, tail_w})
            while chunk := os.read(out_r, 1 << 16):
                tail += chunk
                if len(tail) > 4 * OUTPUT_TAIL:
                    del tail[:-OUTPUT_TAIL]
            give()
        finally:
            os._exit(0)
    os.close(out_r)
    os.close(tail_w)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(out_w, 1)
    os.dup2(out_w, 2)
    os.close(out_w)
    return pid, tail_r


def output_tail(keeper):
    """The session's output tail (text), once fds 1 and 2 no longer feed the keeper; the
    keeper is reaped."""
    pid, tail_r = keeper
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - the code under test may have closed it
            pass
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    if not select.select([tail_r], [], [], KEEPER_WAIT_S)[0]:
        os.kill(pid, signal.SIGTERM)  # a process left behind holds the pipe: stop there
    data = b""
    while select.select([tail_r], [], [], KEEPER_WAIT_S)[0]:
        chunk = os.read(tail_r, 1 << 16)
        if not chunk:
            break
        data += chunk
    os.close(tail_r)
    MutationSession.kill(pid)
    return data.decode("utf-8", "replace")


def wait_for_spec(path, limit_s=600.0):
    """The spec, once the harness has written it (generation runs meanwhile); ``-``: the
    first line of stdin (a second line follows when the spec says ``killers_later``)."""
    if path == "-":
        return read_spec_line()
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
    under test adds lacks the nonce (code that appends "killed" lines to a file), and what
    was written cannot be changed."""

    def write(obj):
        data = (json.dumps(dict(obj, n=nonce)) + "\n").encode()
        while data:
            data = data[os.write(fd, data):]

    return write


def main(spec_path):
    sys.path.insert(0, harness_dir)
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    for var in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "MUTANT_UNDER_TEST"):
        os.environ.pop(var, None)
    import mutmut_adapter
    try:  # registered by object, never through an entry point (run_pytest._child)
        import pytest_timeout
    except ImportError:  # a host run of the runner without the plugin
        pytest_timeout = None

    mutmut_adapter.use_neutral_config()
    sys.stdout.write(json.dumps({"started": {"pid": os.getpid()}}) + "\n")
    sys.stdout.flush()
    spec = wait_for_spec(spec_path)
    spec_at = time.monotonic()
    if "abort" in spec:
        return 0
    if spec_path == "-":
        _hide_spec_input()
    sys.path.append(spec["root"])
    sys.path.extend(spec.get("pythonpath", []))  # the task's, after the repo like the repo
    os.chdir(spec["root"])
    out = _writer(os.dup(1), str(spec.get("nonce", "")))
    keeper = keep_output_tail()
    session = MutationSession(spec, mutmut_adapter, out)
    session.spec_at = spec_at
    code = pytest.main(spec["pytest_args"], plugins=[p for p in (pytest_timeout, session) if p])
    out({"output": output_tail(keeper)})  # the session's output tail, last
    return int(code)


if __name__ == "__main__":
    # os._exit: a thread or an atexit handler the tests left behind cannot keep it alive
    status = 3
    try:
        status = main(sys.argv[1])
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - the code under test may have closed it
                pass
        os._exit(status)
