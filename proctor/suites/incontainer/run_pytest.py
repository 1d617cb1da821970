"""Harness-owned pytest entry point, run inside the sandbox as
``python -I -B run_pytest.py REPO [--deadline S] [--changed-from FILE] [--out-dir DIR] --
PYTEST_ARGS`` (``FILE``: a JSON list of the repo-relative paths the patch touched; ``DIR``:
where a result too big to print goes).

Two processes (DESIGN section 5, "streamed to the harness"):

* The **supervisor** (this process) makes itself non-dumpable, so the code under test (same
  user) can neither read its ``/proc/PID/fd`` nor attach to it, forks the pytest child and
  reads two pipes: the child's stdout+stderr, and the verdict channel of Proctor's plugin.
  It alone writes to the exec's stdout: one line ``PROCTOR-RESULT <base64(zlib(JSON))>``
  with every record the plugin streamed, the child's exit status, whether the deadline
  (``--deadline``, seconds) killed it, how many lines on the channel did not carry the run's
  nonce, and the tail of the child's output (or, past ``INLINE_RESULT_MAX``, the line
  ``PROCTOR-RESULT-FILE <path> <sha256>`` naming a file with the same content), and how
  many processes of the user outlived the child (``stray_processes``: the harness kills
  them before the next step, and skips that kill when there are none). Exit status: the
  child's, or 128 + signal.
* The **child** runs pytest with the plugin object given to ``pytest.main(plugins=...)``
  (never by name: ``-p no:...`` cannot unload it). The channel's write end sits at a random
  fd number that is in neither the environment nor argv, and every record carries a nonce
  drawn by the supervisor, so a line forged by the code under test is counted, not believed.

``-I`` ignores PYTHON* variables and user site; the harness directory goes first on
``sys.path`` and the repository under test *last*, so a module in the repo can never shadow
pytest, its plugins or the standard library at start-up. Plugin autoload is off.

Before anything else is imported in the child, an audit hook (which nothing can remove)
guards the runner: the code under test replacing a function's code object or installing an
audit hook of its own ends the child at once with exit status ``SUBVERTED_EXIT``, which the
harness reads as a flipped tripwire. Only ``types.coroutine`` may set ``__code__``.
"""

import os
import sys

SUBVERTED_EXIT = 86  # proctor.suites.pytest_runner.SUBVERTED_EXIT
RESULT_PREFIX = "PROCTOR-RESULT "  # proctor.suites.pytest_runner.RESULT_PREFIX
HARNESS_ERROR = "PROCTOR-HARNESS-ERROR "  # proctor.suites.pytest_runner.HARNESS_ERROR
RESULT_FILE_PREFIX = "PROCTOR-RESULT-FILE "  # proctor.suites.pytest_runner.RESULT_FILE_PREFIX
INLINE_RESULT_MAX = 128 * 1024  # bytes of base64 printed inline (the exec output cap: 256 KiB)
OUTPUT_TAIL = 16 * 1024  # bytes of the child's output kept
PR_SET_DUMPABLE = 4  # <linux/prctl.h>


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


def _set_dumpable(flag):
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, int(flag), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")


def _parse_argv(argv):
    repo, rest, own = argv[1], argv[2:], {}
    while rest[:1] in (["--deadline"], ["--changed-from"], ["--out-dir"]):
        own[rest[0]], rest = rest[1], rest[2:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    deadline = float(own["--deadline"]) if "--deadline" in own else None
    return repo, deadline, own.get("--changed-from"), own.get("--out-dir", "/tmp"), rest


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


def _child(repo, args, rec_fd, nonce, changed_from, fd):
    """Runs in the forked child: never returns."""
    try:
        _set_dumpable(True)  # only the supervisor needs hiding (and reads its fd table)
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
        os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        for var in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
            os.environ.pop(var, None)
        import proctor_report

        plugin = proctor_report.make_plugin(fd, nonce, repo, changed)
    except BaseException as exc:  # harness fault: no repo code has run yet
        os.write(2, f"\n{HARNESS_ERROR}the runner failed to start: {exc!r}\n".encode())
        os._exit(3)
    import pytest

    sys.exit(int(pytest.main(args, plugins=[plugin])))


class _Streams:
    """What the supervisor reads: nonce-tagged records, forged lines, the output's tail."""

    def __init__(self, nonce):
        self.tag = nonce.encode() + b" "
        self.buf, self.out = b"", bytearray()
        self.out_total, self.records, self.foreign = 0, [], 0

    def take(self, which, chunk):
        if which == "out":
            self.out_total += len(chunk)
            self.out += chunk
            del self.out[:-OUTPUT_TAIL]
            return
        self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        for line in lines:
            if line.startswith(self.tag):
                self.records.append(line[len(self.tag):].decode("utf-8", "replace"))
            elif line:
                self.foreign += 1
        if len(self.buf) > 1 << 20:  # an endless line: not ours
            self.buf, self.foreign = b"", self.foreign + 1


def _channel_check(pid, fd, pipe):
    """Why the child's verdict channel is no longer what the supervisor gave it, or None:
    fd ``fd`` of ``pid`` must be the channel's pipe (``pipe``: its ``/proc`` link text) and
    no other fd of the child may be (red3: code under test dup'ed the channel away, put a
    pipe of its own at the fd, and relayed the plugin's records rewritten). None as well
    when the child's fd table cannot be read (it has exited)."""
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
    if links.get(fd) != pipe:
        return f"the verdict channel's fd now holds {links.get(fd, 'nothing')!r:.60}"
    others = sorted(n for n, link in links.items() if link == pipe and n != fd)
    if others:
        return f"the verdict channel was duplicated to fd {others[0]}"
    return None


def _supervise(pid, rec_r, out_r, nonce, deadline, fd=None):
    import selectors
    import signal
    import time

    pipe = f"pipe:[{os.fstat(rec_r).st_ino}]"
    channel = []
    start = time.monotonic()
    sel = selectors.DefaultSelector()
    sel.register(rec_r, selectors.EVENT_READ, "rec")
    sel.register(out_r, selectors.EVENT_READ, "out")
    streams = _Streams(nonce)
    status, timed_out, drain_until = None, False, None
    while sel.get_map():
        now = time.monotonic()
        if status is None:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status, drain_until = st, now + 0.5
            elif deadline is not None and now - start > deadline:
                timed_out = True
                for target in (-pid, pid):
                    try:
                        os.kill(target, signal.SIGKILL)
                    except OSError:
                        pass
        if drain_until is not None and now > drain_until:
            # Something the child left behind holds a pipe open: take what is buffered
            # (the child's last records are there even if we were slow), then stop.
            for key in list(sel.get_map().values()):
                os.set_blocking(key.fd, False)
                for _ in range(64):
                    try:
                        chunk = os.read(key.fd, 65536)
                    except BlockingIOError:
                        break
                    if not chunk:
                        break
                    streams.take(key.data, chunk)
            break
        for key, _ in sel.select(timeout=0.05):
            chunk = os.read(key.fd, 65536)
            if chunk:
                streams.take(key.data, chunk)
            else:
                sel.unregister(key.fd)
        # Once the plugin has started (the child has put the channel in place), on every
        # round: the channel is still the child's, at its fd, and nowhere else.
        if fd is not None and status is None and streams.records and not channel:
            why = _channel_check(pid, fd, pipe)
            if why:
                channel.append(why)
    if streams.buf:
        streams.foreign += 1
    if status is None:
        status = os.waitpid(pid, 0)[1]
    code = os.waitstatus_to_exitcode(status)
    return {"records": streams.records, "exit": code if code >= 0 else 128 - code,
            "signal": -code if code < 0 else None, "timed_out": timed_out,
            "foreign_lines": streams.foreign, "channel": channel,
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

    repo, deadline, changed_from, out_dir, args = _parse_argv(sys.argv)
    try:
        _set_dumpable(False)
    except Exception as exc:
        sys.stdout.write(f"{HARNESS_ERROR}cannot hide the supervisor: {exc!r}\n")
        sys.stdout.flush()
        os._exit(3)
    nonce = secrets.token_hex(16)
    rec_r, rec_w = os.pipe()
    out_r, out_w = os.pipe()
    fd = _free_fd()
    pid = os.fork()
    if pid == 0:
        os.close(rec_r)
        os.close(out_r)
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        os.close(out_w)
        os.setpgid(0, 0)
        _child(repo, args, rec_w, nonce, changed_from, fd)
        os._exit(3)  # not reached
    os.close(rec_w)
    os.close(out_w)
    result = _supervise(pid, rec_r, out_r, nonce, deadline, fd)
    result["stray_processes"] = _stray_processes()
    _emit(result, out_dir)
    os._exit(result["exit"])


if __name__ == "__main__":
    main()
