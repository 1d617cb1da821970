"""Harness-owned pytest entry point, run inside the sandbox as
``python -I -B run_pytest.py REPO [--deadline S] [--item-timeout S] [--changed-from FILE]
[--skip-from FILE] [--out-dir DIR] [--pythonpath DIRS] [--reach-out FILE] -- PYTEST_ARGS``
(``--changed-from``: a JSON list of the repo-relative paths the patch touched;
``--skip-from``: a JSON object ``{"ids", "paths"}`` of tests already judged and modules
already failed, for a later session of the same suite; ``DIR``: where a result too big to
print goes; ``--reach-out``: the baseline's reach map is written there, see
``reach_recorder.py``).

Two processes (design.md section 5, "streamed to the harness"):

* The **supervisor** (this process) makes itself non-dumpable, so the code under test (same
  user) can neither read its ``/proc/PID/fd`` nor attach to it, forks the pytest child and
  reads two channels: a pipe with the child's stdout+stderr, and the verdict channel of
  Proctor's plugin, a ``SOCK_SEQPACKET`` socket pair with ``SO_PASSCRED``: one record a
  message, each carrying the pid the kernel says sent it. Only the pytest process's own
  records count: a forked copy of it (a test that forks and whose child goes on running
  pytest) writes nothing the supervisor believes (it counts them, ``other_processes``).
  It ignores SIGTERM, SIGINT, SIGHUP and SIGQUIT (``kill(-1, SIGTERM)`` in a test cannot
  end it; the child has them back).
  It alone writes to the exec's stdout: one line ``PROCTOR-RESULT <base64(zlib(JSON))>``
  with every record the plugin streamed, the child's exit status, whether the deadline
  (``--deadline``, seconds) killed it, how many records on the channel did not carry the
  run's nonce, and the tail of the child's output (or, past ``INLINE_RESULT_MAX``, the line
  ``PROCTOR-RESULT-FILE <path> <sha256>`` naming a file with the same content), and how
  many processes of the user outlived the child (``stray_processes``: the harness kills
  them before the next step, and skips that kill when there are none). Exit status: the
  child's, or 128 + signal.

  It times every test from the plugin's ``start`` record (and every collector, and the
  gaps between them) and kills the child when one runs past ``--item-timeout`` seconds:
  the per-test limit enforced from outside the process, which code under test cannot
  disable (pytest-timeout's SIGALRM inside the child is the first, gentler limit). The
  result says how the session ended (``ended``: ``completed``, ``item_timeout``,
  ``deadline``, ``channel_closed`` (the code under test closed the channel's fd) or
  ``exited``; the phase and the test or collector that was running, also when the session
  record came while a test or a collector was still open, as ``pytest.exit()`` in a test or
  ``SystemExit`` at a module's import do; the signal; whether the memory cgroup's OOM
  killer fired), so the harness can tell an honest
  early end from tampering and go on in a new session without what was judged.
  The supervisor is the child subreaper of everything the child starts: whatever the code
  under test leaves running (daemons included) is killed before the result is printed.
* The **child** runs pytest with the plugin object given to ``pytest.main(plugins=...)``
  (never by name: ``-p no:...`` cannot unload it), then ends with ``os._exit`` (a thread
  or an ``atexit`` handler the tests left behind cannot keep it alive). The channel's
  write end sits at a random fd number that is in neither the environment nor argv, and
  every record carries a nonce drawn by the supervisor, so a record forged by the code
  under test is counted, not believed.

``-I`` ignores PYTHON* variables and user site; the harness directory goes first on
``sys.path`` and the repository under test *last*, so a module in the repo can never shadow
pytest, its plugins or the standard library at start-up. Plugin autoload is off.

Before anything else is imported in the child, an audit hook (which nothing can remove)
guards the runner: the code under test replacing a function's code object or installing an
audit hook of its own ends the child at once with exit status ``SUBVERTED_EXIT``, which the
harness reads as a flipped tripwire. Only ``types.coroutine`` may set ``__code__``.
"""

import os
import signal
import sys

SUBVERTED_EXIT = 86  # proctor.suites.pytest_runner.SUBVERTED_EXIT
RESULT_PREFIX = "PROCTOR-RESULT "  # proctor.suites.pytest_runner.RESULT_PREFIX
HARNESS_ERROR = "PROCTOR-HARNESS-ERROR "  # proctor.suites.pytest_runner.HARNESS_ERROR
RESULT_FILE_PREFIX = "PROCTOR-RESULT-FILE "  # proctor.suites.pytest_runner.RESULT_FILE_PREFIX
INLINE_RESULT_MAX = 128 * 1024  # bytes of base64 printed inline (the exec output cap: 256 KiB)
OUTPUT_TAIL = 16 * 1024  # bytes of the child's output kept
MAX_RECORD_BYTES = 256 * 1024  # one message of the verdict channel, at most
PR_SET_DUMPABLE = 4  # <linux/prctl.h>
PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
#: Signals the kernel sends for a resource limit (RLIMIT_FSIZE, RLIMIT_CPU).
LIMIT_SIGNALS = {25: "file_size", 24: "cpu_time"}
#: Where the memory cgroup counts its OOM kills (a line ``oom_kill N``): cgroup v2, v1.
#: Signals the supervisor ignores (the child gets the default back): a test that signals
#: every process of the user must not end the harness's own process.
SUPERVISOR_IGNORES = (1, 2, 3, 15)  # SIGHUP, SIGINT, SIGQUIT, SIGTERM
MEMORY_EVENTS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")
#: The ``environment`` variant of a differential run (proctor.suites.variants) removes these
#: (the CI variables the harness's static scan knows, and pytest's own, which the plugin
#: also keeps pytest from setting).
VARIANT_UNSET = ("CI", "GITHUB_ACTIONS", "GITLAB_CI", "TRAVIS", "JENKINS_URL", "BUILDKITE",
                 "CIRCLECI", "TF_BUILD", "CONTINUOUS_INTEGRATION", "BUILD_NUMBER", "RUN_ID",
                 "PYTEST_CURRENT_TEST", "PYTEST_VERSION", "PYTEST_XDIST_WORKER")
#: What the ``argv`` variant shows as the program: a plain one, naming neither pytest nor
#: the harness.
NEUTRAL_PROGRAM = "/usr/local/bin/app"
#: What the ``environment`` variant shows as the process's initial environment
#: (``/proc/<pid>/environ``): a plain program's, naming neither the harness nor its paths.
NEUTRAL_ENVIRON = b"HOME=/home/app\0LANG=C.UTF-8\0PATH=/usr/local/bin:/usr/bin:/bin\0"


#: Audit events that reach into the running harness (find its objects, trace or jump over
#: a test's lines): reported as tampering when code the patch touched raises them.
REACHING_EVENTS = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents",
                             "sys.settrace", "sys.setprofile", "sys._current_frames"})


PACKAGE_DIRS = ("/site-packages/", "/dist-packages/")  # inside a venv's lib/pythonX.Y too


def _install_guard(suspects=(), report=None):
    """``suspects``: absolute paths of the files the patch touched; ``report(why)`` sends a
    tampering record when code in one of them raises a REACHING_EVENT: the caller, or the
    first caller outside the standard library (a stdlib helper may do the call for it).
    Never further: pytest-timeout's signal handler calls ``sys._current_frames`` on top of
    whatever frame it interrupted, a test looping in patched code included."""
    import sysconfig
    import types

    exit_now, write, getframe = os._exit, os.write, sys._getframe
    err = os.dup(2)  # the real stderr: pytest's capture replaces fd 2 while tests run
    allowed = types.coroutine.__code__  # the code object itself: a file name can be faked
    suspects, said = frozenset(suspects), set()
    stdlib = tuple(os.path.join(sysconfig.get_paths()[k], "") for k in ("stdlib", "platstdlib"))

    def guard(event, args):
        if event in REACHING_EVENTS:
            if report is None or event in said or not suspects:
                return
            frame = getframe(1)
            while frame is not None and frame.f_code.co_filename.startswith(stdlib) and not \
                    any(d in frame.f_code.co_filename for d in PACKAGE_DIRS):
                frame = frame.f_back
            if frame is not None and frame.f_code.co_filename in suspects:
                said.add(event)
                report(f"code the patch touched called {event} "
                       f"({frame.f_code.co_filename}:{frame.f_lineno})")
            return
        if event == "sys.addaudithook":
            why = "installed an audit hook"
        elif event == "object.__setattr__" and len(args) > 1 and args[1] == "__code__":
            if getframe(1).f_code is allowed:
                return
            why = "replaced a function's __code__"
        else:
            return
        try:
            write(err, f"\nproctor: the code under test {why}\n".encode())
        finally:
            exit_now(SUBVERTED_EXIT)

    sys.addaudithook(guard)


def _absolute(repo, changed):
    root = os.path.realpath(repo)
    return [os.path.join(root, p) for p in changed] + [
        os.path.realpath(os.path.join(root, p)) for p in changed]


def _tamper_sender(fd, nonce):
    import json

    tag, write = nonce.encode() + b" ", os.write

    def send(why):
        write(fd, tag + json.dumps({"k": "tamper", "why": why[:300]}).encode() + b"\n")

    return send


def _prctl(option, value):
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, int(value), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _set_dumpable(flag):
    _prctl(PR_SET_DUMPABLE, flag)


OWN_OPTIONS = ("--deadline", "--item-timeout", "--changed-from", "--skip-from", "--out-dir",
               "--pythonpath", "--reach-out")


def _parse_argv(argv):
    """(repo, own options by name without dashes, pytest's arguments)."""
    repo, rest, own = argv[1], argv[2:], {}
    while rest[:1] and rest[0] in OWN_OPTIONS:
        own[rest[0][2:].replace("-", "_")], rest = rest[1], rest[2:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    for key in ("deadline", "item_timeout"):
        own[key] = float(own[key]) if key in own else None
    own.setdefault("out_dir", "/tmp")
    return repo, own, rest


def _read_skip(path):
    """``{"ids", "paths", "only", "keep", "pristine", "variant"}`` from ``--skip-from`` (see
    proctor_report's ``make_plugin``; None: nothing to skip)."""
    if not path:
        return None
    import json

    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    out = {key: [str(v) for v in data.get(key) or ()]
           for key in ("ids", "paths", "keep", "variant")}
    if data.get("only") is not None:
        out["only"] = [str(v) for v in data["only"]]
    if isinstance(data.get("pristine"), dict):
        out["pristine"] = {str(k): str(v) for k, v in data["pristine"].items()}
    return out


def _free_fd():
    """A random unused fd number (drawn by the supervisor before the fork, so it knows
    where the child keeps the verdict channel)."""
    import secrets

    fd = 64 + secrets.randbelow(900)
    while True:
        try:
            os.fstat(fd)
            fd += 1
        except OSError:
            return fd


def _child(repo, args, rec_fd, nonce, changed_from, fd, skip=None, pythonpath=None,  # noqa: PLR0913
           reach_out=None):
    """Runs in the forked child: never returns."""
    try:
        _set_dumpable(True)  # only the supervisor needs hiding (and reads its fd table)
        try:  # under memory pressure the kernel kills the tests, never their supervisor
            with open("/proc/self/oom_score_adj", "w") as fh:
                fh.write("1000")
        except OSError:
            pass
        for signum in SUPERVISOR_IGNORES:
            signal.signal(signum, signal.SIG_DFL)
        os.dup2(rec_fd, fd, inheritable=False)
        os.close(rec_fd)
        changed = None
        if changed_from:
            import json

            with open(changed_from, encoding="utf-8") as fh:
                changed = [str(p) for p in json.load(fh)]
        _install_guard(_absolute(repo, changed or []), _tamper_sender(fd, nonce))
        harness_dir = os.path.dirname(os.path.abspath(__file__))
        sys.path.insert(0, harness_dir)
        sys.path.append(repo)
        # the task's pythonpath (':'-separated, absolute): after the repo, like the repo
        sys.path.extend(d for d in (pythonpath or "").split(":") if d)
        os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        for var in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
            os.environ.pop(var, None)
        _apply_variant(frozenset((skip or {}).get("variant") or ()))
        import proctor_report
        try:  # registered by object, never through an entry point (see below)
            import pytest_timeout
        except ImportError:  # a host run of the runner without the plugin
            pytest_timeout = None

        plugins = [pytest_timeout, proctor_report.make_plugin(fd, nonce, repo, changed, skip)]
        if reach_out:  # the baseline's extra session: which tests reach which functions
            import reach_recorder

            plugins.append(reach_recorder.ReachRecorder(repo, reach_out))
    except BaseException as exc:  # harness fault: no repo code has run yet
        os.write(2, f"\n{HARNESS_ERROR}the runner failed to start: {exc!r}\n".encode())
        os._exit(3)
    import pytest

    code = 3
    try:
        if "modules" in ((skip or {}).get("variant") or ()):  # after the plugin's snapshot
            proctor_report.import_unobserved(repo, changed)
        # pytest resolves ``-p pytest_timeout`` through ``pytest11`` entry points as well,
        # even with autoload off, and a ``*.dist-info`` the patch adds to the repo is one;
        # a plugin registered under the name first is never looked up.
        code = int(pytest.main(args, plugins=[p for p in plugins if p]))
    except BaseException:  # noqa: BLE001 - reported on the output; the exit status says it
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - the code under test may have closed it
                pass
        os._exit(code)


def _stat_area(first):
    """``(start, end)``: the memory area of this process whose start and end addresses are
    fields ``first`` and ``first + 1`` of ``/proc/self/stat`` (numbered as in proc(5));
    None when they cannot be read."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rpartition(b")")[2].split()  # fields[0] is field 3
        return int(fields[first - 3]), int(fields[first - 2])
    except (OSError, IndexError, ValueError):
        return None


def _overwrite(area, data):
    """Write ``data`` and NUL padding over ``area`` (:func:`_stat_area`); False when it is
    unknown or too small."""
    import ctypes

    if area is None or area[1] - area[0] <= len(data):
        return False
    start, end = area
    ctypes.memmove(start, data + b"\0" * (end - start - len(data)), end - start)
    return True


def _neutral_cmdline(program):
    """Make this process's command line as the kernel shows it (``/proc/<pid>/cmdline``,
    ``ps``) read ``program`` alone: the argument area (``arg_start``..``arg_end``, fields
    48 and 49 of ``/proc/self/stat``) overwritten in place with ``program`` and NUL
    padding, as ``setproctitle`` does. Nothing of Python reads that memory after startup
    (``sys.argv`` and ``sys.orig_argv`` are copies). Done before the fork, the tests'
    process and their supervisor both show it. False when the area cannot be found or is
    too small."""
    return _overwrite(_stat_area(48), program.encode())


def _neutral_environ(environ):
    """Make this process's initial environment as the kernel shows it
    (``/proc/<pid>/environ``) read ``environ`` (bytes, ``NAME=value`` entries each ending in
    NUL): the environment area (``env_start``..``env_end``, fields 50 and 51 of
    ``/proc/self/stat``) overwritten in place with ``environ`` and NUL padding. The C
    library's ``environ`` pointed into that area: it is first rebuilt on the heap from
    ``os.environ`` (a copy Python made at startup), so ``getenv`` keeps reading the real
    variables. Done before the fork, the tests' process and their supervisor both show it.
    False when the area cannot be found or is too small."""
    import ctypes

    area = _stat_area(50)
    if area is None or area[1] - area[0] <= len(environ):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.clearenv() != 0:
        return False
    for name, value in os.environ.items():
        libc.setenv(os.fsencode(name), os.fsencode(value), 1)
    return _overwrite(area, environ)


def _apply_variant(variant):
    """The parts of a differential run's variant set up before pytest starts (the plugin
    does the rest): ``environment`` unsets :data:`VARIANT_UNSET`, ``argv`` makes
    ``sys.argv``, ``sys.orig_argv`` and ``__main__.__file__`` name :data:`NEUTRAL_PROGRAM`
    (pytest reads its arguments from ``pytest.main``'s, never from ``sys.argv``; the
    process's kernel command line is the supervisor's, :func:`_neutral_cmdline`)."""
    if "environment" in variant:
        for var in VARIANT_UNSET:
            os.environ.pop(var, None)
    if "argv" in variant:
        sys.argv = [NEUTRAL_PROGRAM]
        sys.orig_argv = [sys.executable, NEUTRAL_PROGRAM]
        main = sys.modules.get("__main__")
        if main is not None:
            main.__file__ = NEUTRAL_PROGRAM


class _Streams:
    """What the supervisor reads: nonce-tagged records, forged ones, the output's tail, and
    (from the records) what the child is doing now: ``current`` is ``(phase, id)`` of the
    test or collector running (phase ``test`` or ``collect``; None between them), ``since``
    when it started or when the child last said anything; ``collecting``: the collector
    started and not yet done (kept when collection is cut short)."""

    def __init__(self, nonce, now):
        self.tag = nonce.encode() + b" "
        self.out = bytearray()
        self.out_total, self.records, self.foreign, self.others = 0, [], 0, 0
        self.current, self.since, self.phase, self.collecting = None, now, "startup", None

    def output(self, chunk):
        self.out_total += len(chunk)
        self.out += chunk
        del self.out[:-OUTPUT_TAIL]

    def message(self, data, own, now=0.0):
        """One message of the verdict channel; ``own``: the kernel says the pytest process
        itself sent it (a forked copy of it does not count)."""
        if not own:
            self.others += 1
            return
        line = data[:-1] if data.endswith(b"\n") else data
        if line.startswith(self.tag) and b"\n" not in line:
            text = line[len(self.tag):].decode("utf-8", "replace")
            self.records.append(text)
            self._follow(text, now)
        elif data:
            self.foreign += 1

    def _follow(self, text, now):
        import json

        try:
            rec = json.loads(text)
            kind, ident = rec.get("k"), rec.get("id")
        except (ValueError, RecursionError, AttributeError):
            return  # judged on the host (a record the plugin never writes)
        if kind in ("raw", "tamper"):
            return  # written from inside a test: no change of what is running
        self.since = now
        if kind == "collect":
            self.current, self.phase, self.collecting = ("collect", ident), "collect", ident
        elif kind == "start":
            self.current, self.phase = ("test", ident), "test"
        elif kind == "collected":
            self.current = None
            if ident == self.collecting:
                self.collecting = None
        elif kind == "test":
            self.current = None
        elif kind == "items":
            self.phase = "run"
            if self.current and self.current[0] == "collect":
                self.current = None  # collection was cut short: `collecting` says where
        elif kind == "session":  # a test still open was interrupted (pytest.exit)
            self.phase = "finish"

    def blamed(self):
        """(phase, (kind, id) or None): what the session was in when it ended: the open
        test, else the collector whose collection never finished."""
        if self.current is None and self.collecting is not None:
            return self.phase, ("collect", self.collecting)
        return self.phase, self.current


#: ``_channel_check``'s answer when the child closed the channel's fd (and holds no copy).
CLOSED = "closed"


def _channel_check(pid, fd, link):
    """Why the child's verdict channel is no longer what the supervisor gave it, or None:
    fd ``fd`` of ``pid`` must be the channel's socket (``link``: its ``/proc`` link text) and
    no other fd of the child may be (code under test that dup'ed the channel away, put a
    channel of its own at the fd and relayed the plugin's records rewritten). :data:`CLOSED`
    when the fd is closed and nothing else holds it (the code closed its inherited fds: no
    record can come any more, no record was rewritten either). None as well when the
    child's fd table cannot be read (it has exited)."""
    where = f"/proc/{pid}/fd"
    try:
        links = {}
        for name in os.listdir(where):
            try:
                links[int(name)] = os.readlink(f"{where}/{name}")
            except OSError:
                continue
    except OSError:
        return None
    if not links:
        return None
    others = sorted(n for n, target in links.items() if target == link and n != fd)
    if others:
        return f"the verdict channel was duplicated to fd {others[0]}"
    if fd not in links:
        return CLOSED
    if links[fd] != link:
        return f"the verdict channel's fd now holds {links[fd]!r:.60}"
    return None


def _exiting(pid):
    """Is ``pid`` gone or a zombie (its fd table is emptied while it exits)?"""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return stat[stat.rindex(b")") + 2:][:1] in (b"Z", b"X")
    except (OSError, ValueError):
        return True


def _confirmed(pid, fd, link):
    """:func:`_channel_check` once more, a moment later, unless the child is exiting by
    then: a process that dies (a segfault, say) closes its fds one by one, so a look at a
    table half torn down finds the channel gone without anyone having moved it."""
    import time

    time.sleep(0.02)
    if _exiting(pid):
        return None
    why = _channel_check(pid, fd, link)
    return None if why and _exiting(pid) else why


def _oom_kills():
    """The memory cgroup's ``oom_kill`` count (None: not readable here)."""
    for path in MEMORY_EVENTS:
        try:
            with open(path, encoding="ascii") as fh:
                for line in fh:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def _reap(pid):
    """Reap every exited child (orphans adopted as subreaper included) without blocking;
    the wait status of ``pid`` when it was among them, else None."""
    status = None
    while True:
        try:
            done, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status
        if not done:
            return status
        if done == pid:
            status = st


def _descendants():
    """Pids whose parent chain leads to this process (as child subreaper, everything the
    child started that is still alive)."""
    me, parent = os.getpid(), {}
    try:
        names = [n for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []
    for name in names:
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
            parent[int(name)] = int(stat[stat.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    out = []
    for pid in parent:
        cur, seen = pid, 0
        while cur in parent and seen < 4096:
            cur, seen = parent[cur], seen + 1
            if cur == me:
                out.append(pid)
                break
    return out


def _kill_descendants(rounds=50):
    """SIGKILL everything this process (the child subreaper) has below it, until nothing
    is left (a fork bomb forks while it is killed: a few rounds); reaps them. Returns how
    many were killed."""
    import signal
    import time

    killed = 0
    for _ in range(rounds):
        pids = _descendants()
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        time.sleep(0.01)
        _reap(None)
    _reap(None)
    return killed


def _receive(sock, pid):
    """One message of the verdict channel: (data, sent by ``pid`` itself), or (b"", True) at
    its end. The sender's pid comes from the kernel (``SCM_CREDENTIALS``), not the sender."""
    import socket
    import struct

    data, anc, _flags, _ = sock.recvmsg(MAX_RECORD_BYTES, socket.CMSG_SPACE(12))
    sender = None
    for level, kind, payload in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and \
                len(payload) >= 12:
            sender = struct.unpack("iII", payload[:12])[0]
    return data, sender == pid


def _supervise(pid, sock, out_r, nonce, deadline, fd=None, item_timeout=None, link=None):  # noqa: C901, PLR0913, PLR0915
    import selectors
    import signal
    import time

    channel = []
    start = time.monotonic()
    sel = selectors.DefaultSelector()
    sel.register(sock.fileno(), selectors.EVENT_READ, "rec")
    sel.register(out_r, selectors.EVENT_READ, "out")
    streams = _Streams(nonce, start)
    status, killed, drain_until, blamed = None, None, None, None

    def kill_child(why):
        nonlocal killed, blamed
        # What the child sent before now is what it was doing: read every record still
        # buffered before blaming (a busy child can be many records ahead of this loop,
        # which reads one per round), or the blame falls on an earlier test or collector.
        drain_records(time.monotonic())
        killed, blamed = why, streams.blamed()
        for target in (-pid, pid):
            try:
                os.kill(target, signal.SIGKILL)
            except OSError:
                pass

    def read(key, now):
        if key.data == "out":
            chunk = os.read(key.fd, 65536)
            if chunk:
                streams.output(chunk)
            return bool(chunk)
        data, own = _receive(sock, pid)
        if data:
            streams.message(data, own, now)
        return bool(data)

    def drain_records(now):
        os.set_blocking(sock.fileno(), False)
        try:
            for _ in range(65536):
                data, own = _receive(sock, pid)
                if not data:
                    break
                streams.message(data, own, now)
        except (BlockingIOError, InterruptedError):
            pass
        finally:
            os.set_blocking(sock.fileno(), True)

    while sel.get_map():
        now = time.monotonic()
        if status is None:
            status = _reap(pid)
            if status is not None:
                drain_until = now + 0.5
                _kill_descendants()  # what it left behind holds the channels open
            elif killed is None and deadline is not None and now - start > deadline:
                kill_child("deadline")
            elif killed is None and item_timeout is not None and \
                    now - streams.since > item_timeout:
                kill_child("item_timeout")
        if drain_until is not None and now > drain_until:
            # Something still holds a channel open: take what is buffered (the child's last
            # records are there even if we were slow), then stop.
            for key in list(sel.get_map().values()):
                os.set_blocking(key.fd, False)
                for _ in range(4096):
                    try:
                        if not read(key, now):
                            break
                    except BlockingIOError:
                        break
            break
        for key, _ in sel.select(timeout=0.05):
            if not read(key, time.monotonic()):
                sel.unregister(key.fd)
        # Once the plugin has started (the child has put the channel in place), on every
        # round: the channel is still the child's, at its fd, and nowhere else.
        if fd is not None and status is None and streams.records and not channel \
                and killed is None:
            why = _channel_check(pid, fd, link)
            if why:
                why = _confirmed(pid, fd, link)
            if why == CLOSED:
                kill_child("channel_closed")  # nothing more can be reported
            elif why:
                channel.append(why)
    if status is None:
        while status is None:
            status = _reap(pid)
            if status is None:
                time.sleep(0.01)
    code = os.waitstatus_to_exitcode(status)
    if blamed is None:
        blamed = streams.blamed()
    phase, current = blamed
    finished = phase == "finish" and not (current and current[0] == "test") and \
        streams.collecting is None
    ended = {"why": killed or ("completed" if finished else "exited"),
             "phase": phase, "item": current[1] if current else None,
             "item_phase": current[0] if current else None,
             "signal": -code if code < 0 else None}
    return {"records": streams.records, "exit": code if code >= 0 else 128 - code,
            "signal": -code if code < 0 else None, "timed_out": killed == "deadline",
            "foreign_lines": streams.foreign, "other_processes": streams.others,
            "channel": channel, "ended": ended,
            "output": streams.out.decode("utf-8", "replace"),
            "output_bytes": streams.out_total}


def _stray_processes():
    """Processes of our user still alive once the child is gone, other than this one, its
    ancestors and PID 1 (the sandbox init): what the code under test left running. None
    when /proc cannot be read."""
    me, uid = os.getpid(), os.getuid()
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    status = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
            status[pid] = (int(fields["Uid"].split()[0]), int(fields["PPid"]))
        except (OSError, ValueError, KeyError, IndexError):
            continue  # gone meanwhile
    spared, cur = {1, me}, me
    while cur in status and status[cur][1] not in (0, cur):
        cur = status[cur][1]
        spared.add(cur)
    return sum(1 for pid, (owner, _) in status.items() if owner == uid and pid not in spared)


def _emit(result, out_dir):
    """Print the result line; a result too big for the exec's output cap goes to a file in
    ``out_dir`` whose name and sha256 are printed instead (a later change to it shows)."""
    import base64
    import hashlib
    import json
    import secrets
    import zlib

    blob = base64.b64encode(zlib.compress(json.dumps(result).encode(), 6))
    if len(blob) <= INLINE_RESULT_MAX:
        line = RESULT_PREFIX + blob.decode()
    else:
        path = os.path.join(out_dir, f"result-{secrets.token_hex(12)}.b64")
        with open(path, "wb") as fh:
            fh.write(blob)
        line = f"{RESULT_FILE_PREFIX}{path} {hashlib.sha256(blob).hexdigest()}"
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main():
    import secrets
    import socket

    repo, own, args = _parse_argv(sys.argv)
    try:
        _set_dumpable(False)
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        for signum in SUPERVISOR_IGNORES:
            signal.signal(signum, signal.SIG_IGN)
        skip = _read_skip(own.get("skip_from"))
        variant = (skip or {}).get("variant") or ()
        if "argv" in variant:
            _neutral_cmdline(NEUTRAL_PROGRAM)
        if "environment" in variant:
            _neutral_environ(NEUTRAL_ENVIRON)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    except Exception as exc:
        sys.stdout.write(f"{HARNESS_ERROR}cannot prepare the supervisor: {exc!r}\n")
        sys.stdout.flush()
        os._exit(3)
    rec_w = theirs.detach()
    link = f"socket:[{os.fstat(rec_w).st_ino}]"
    nonce = secrets.token_hex(16)
    out_r, out_w = os.pipe()
    fd = _free_fd()
    oom_before = _oom_kills()
    pid = os.fork()
    if pid == 0:
        ours.close()
        os.close(out_r)
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        os.close(out_w)
        os.setpgid(0, 0)
        _child(repo, args, rec_w, nonce, own.get("changed_from"), fd, skip,
               own.get("pythonpath"), own.get("reach_out"))
        os._exit(3)  # not reached
    os.close(rec_w)
    os.close(out_w)
    result = _supervise(pid, ours, out_r, nonce, own["deadline"], fd, own["item_timeout"],
                        link)
    result["killed_descendants"] = _kill_descendants()
    oom_after = _oom_kills()
    result["ended"]["oom"] = (oom_before is not None and oom_after is not None
                              and oom_after > oom_before)
    result["stray_processes"] = _stray_processes()
    _emit(result, own["out_dir"])
    os._exit(result["exit"])


if __name__ == "__main__":
    main()
