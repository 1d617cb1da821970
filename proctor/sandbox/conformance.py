"""The promises every sandbox backend keeps, as checks a backend author can run.

Each check is a plain function ``check_<name>(open_sb) -> None`` that opens the sandboxes
it needs with ``open_sb(limits=None, mounts=None) -> Sandbox`` (a new sandbox of the backend
under test; ``limits`` None means ``Limits()``, ``mounts`` as for
:data:`proctor.sandbox.base.BACKENDS`), runs commands in them, and returns when the promise
holds. It raises :class:`ConformanceError` saying what it saw when the promise is broken,
and :class:`CheckSkipped` naming the limit and the reason when the backend cannot enforce
that limit on this machine (``Sandbox.unenforced``). Times are in seconds, sizes in bytes
(``MiB`` = 1024**2).

The promises: the commands run as the unprivileged sandbox user without capabilities; the
root file system is read-only and the writable places private; read-only files stay
unchanged; a timeout kills the whole process tree; there is no network; the memory, pids,
file-size and disk limits hold; output is capped with a marker and a huge output is
streamed, never held whole; standard input is fed as documented; host directories are
mounted read-only; nothing written inside reaches the host or the next sandbox; ``close``
leaves nothing.

:data:`CHECKS` lists them by name; :func:`run_conformance` runs them on one backend, each in
fresh sandboxes that are always closed, and returns one :class:`CheckResult` per check.
``proctor sandbox check`` is the command line over it; ``tests/test_sandbox_conformance.py``
runs every check on every registered backend.
"""

from __future__ import annotations

import hashlib
import secrets
import shutil
import tempfile
import threading
import time
import traceback
import tracemalloc
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from proctor.errors import InfraError, TaskConfigError
from proctor.sandbox.backends import BACKENDS, resolve_env
from proctor.sandbox.base import ExecResult, Limits, Sandbox
from proctor.sandbox.layout import PYTHON as PY
from proctor.sandbox.layout import ROOT_ENV, SANDBOX_UID

MiB = 1024**2


class ConformanceError(AssertionError):
    """A backend broke a promise; the message says which and what was seen."""


class CheckSkipped(Exception):
    """The check cannot apply to this backend on this machine; the message says why (the
    limit the backend does not enforce here, and its reason)."""


class OpenSandbox(Protocol):
    """``open_sb(limits=None, mounts=None) -> Sandbox``: a new sandbox of the backend under
    test; the caller of the check closes every sandbox it opened."""

    def __call__(self, limits: Limits | None = None,
                 mounts: dict[str, Path] | None = None) -> Sandbox:
        """A new sandbox with ``limits`` (None: the defaults) and ``mounts``."""
        ...


@dataclass(frozen=True)
class Check:
    """One promise: ``name`` (what ``--only`` takes), ``title`` (one line) and ``func``."""

    name: str
    title: str
    func: Callable[[OpenSandbox], None]


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one check on one backend. ``status``: ``passed``, ``failed`` (the message
    says what was seen, or which exception the check raised) or ``skipped`` (the message
    says why); ``seconds``: wall time of the check, sandbox creation and closing included."""

    name: str
    backend: str
    status: Literal["passed", "failed", "skipped"]
    message: str
    seconds: float

    @property
    def failed(self) -> bool:
        """Whether the backend broke this promise (a skip is not a failure)."""
        return self.status == "failed"


#: name -> check, in the order :func:`run_conformance` runs them.
CHECKS: dict[str, Check] = {}


def _check(func: Callable[[OpenSandbox], None]) -> Callable[[OpenSandbox], None]:
    """Register the decorated ``check_<name>`` function as the check ``<name>``, its
    docstring (one line) as the title."""
    name = func.__name__.removeprefix("check_")
    if name in CHECKS:
        raise ValueError(f"two conformance checks named {name!r}")
    CHECKS[name] = Check(name, " ".join((func.__doc__ or name).split()), func)
    return func


def _expect(cond: object, message: str) -> None:
    if not cond:
        raise ConformanceError(message)


def _seen(res: ExecResult, tail: int = 300) -> str:
    out = res.output if len(res.output) <= tail else "..." + res.output[-tail:]
    return (f"exit {res.exit_code}, timed_out={res.timed_out}, truncated={res.truncated}, "
            f"{res.duration_s:.1f} s, output {out!r}")


def _require(sb: Sandbox, limit: str) -> None:
    """Skip the check when ``sb`` does not enforce ``limit`` here."""
    reason = getattr(sb, "unenforced", {}).get(limit)
    if reason:
        raise CheckSkipped(f"{sb.name}: limit '{limit}' not enforced: {reason}")


def _recovers(sb: Sandbox, within_s: float = 15.0) -> bool:
    """The sandbox runs a command again within ``within_s`` (dying processes of a fork bomb
    may hold the pids limit for a moment on a loaded machine)."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if sb.run(["true"], timeout=10).ok:
            return True
        time.sleep(0.5)
    return False


def _procs(sb: Sandbox) -> str:
    return sb.run(["sh", "-c", "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; "
                   "done 2>/dev/null"], timeout=10).output


def _runs_again(sb: Sandbox) -> None:
    res = sb.run(["true"], timeout=10)
    _expect(res.ok, f"the sandbox no longer runs `true`: {_seen(res)}")


# ------------------------------------------------------------------ identity, file system


@_check
def check_user_without_capabilities(open_sb: OpenSandbox) -> None:
    """Runs as the sandbox user (uid 1000), no capabilities."""
    sb = open_sb()
    uid = sb.run(["id", "-u"], timeout=10).output.strip()
    _expect(uid == "1000", f"commands run as uid {uid!r}, not 1000")
    caps = sb.run(["grep", "CapEff", "/proc/self/status"], timeout=10).output
    _expect(caps.split()[-1:] == ["0000000000000000"], f"effective capabilities: {caps!r}")


@_check
def check_root_ignores_user_config(open_sb: OpenSandbox) -> None:
    """Root's commands read no configuration the sandbox user can write (git's, in HOME)."""
    sb = open_sb()
    # The bait: a git filter in the user's config, run on every file git apply reads; it
    # logs the uid that ran it. As the user it runs (the control); as root it must not.
    bait = sb.run(["sh", "-c", """set -e
mkdir -p "$HOME/.config/git" /tmp/as-user
printf 'id -u >> /tmp/filtered\ncat\n' > /tmp/filter.sh
printf '[filter "p"]\n\tclean = sh /tmp/filter.sh\n' > "$HOME/.gitconfig"
echo '* filter=p' > "$HOME/.config/git/attributes"
printf -- '--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-a\n+b\n' > /tmp/p.diff
cd /tmp/as-user && echo a > f.txt && git apply /tmp/p.diff && cat f.txt /tmp/filtered
rm /tmp/filtered"""], timeout=30)
    _expect(bait.ok and bait.output.split() == ["b", str(SANDBOX_UID)],
            f"the control (git apply as the sandbox user runs its filter): {_seen(bait)}")
    res = sb.run(["sh", "-c", 'echo "$HOME"; mkdir /proctor/as-root && cd /proctor/as-root '
                  "&& echo a > f.txt && git apply /tmp/p.diff && cat f.txt; "
                  "cat /tmp/filtered 2>/dev/null; true"], timeout=30, user="0:0")
    _expect(res.output.split() == [ROOT_ENV["HOME"], "b"],
            f"root's git apply read the user's git configuration (expected HOME "
            f"{ROOT_ENV['HOME']}, the patched file, no filter run): {_seen(res)}")


@_check
def check_read_only_root(open_sb: OpenSandbox) -> None:
    """The root is read-only; /work, /tmp, HOME, /proctor/out, /proctor/in are writable."""
    sb = open_sb()
    for path in ("/usr/proctor-x", "/etc/proctor-x", "/proctor-x", "/opt/proctor/venv/x"):
        res = sb.run(["touch", path], timeout=10)
        _expect(res.exit_code != 0, f"the sandbox user could create {path}")
    for path in ("/work/x", "/tmp/x", "$HOME/x", "/proctor/out/x", "/proctor/in/x"):
        res = sb.run(["sh", "-c", f"touch {path}"], timeout=10)
        _expect(res.ok, f"the sandbox user cannot create {path}: {_seen(res)}")


@_check
def check_files_roundtrip(open_sb: OpenSandbox) -> None:
    """Files round-trip through put_files / get_file; read-only files cannot be changed."""
    sb = open_sb()
    sb.put_files("/work/repo", {"pkg/a.py": b"x = 1\n"})
    sb.put_files("/proctor/harness", {"h.py": b"y = 2\n"}, read_only=True)
    for path, want in (("/work/repo/pkg/a.py", b"x = 1\n"), ("/proctor/harness/h.py", b"y = 2\n"),
                       ("/work/repo/missing.py", None)):
        got = sb.get_file(path)
        _expect(got == want, f"get_file({path!r}) returned {got!r}, expected {want!r}")
    got = sb.get_file("/proctor/harness/h.py", max_bytes=3)
    _expect(got is None, f"get_file of a 6-byte file with max_bytes=3 returned {got!r}, not None")
    tamper = sb.run(["sh", "-c", "echo z > /proctor/harness/h.py; rm -f /proctor/harness/h.py;"
                     " mv /proctor/harness /proctor/x"], timeout=10)
    _expect(tamper.exit_code != 0, f"changing read-only files succeeded: {_seen(tamper)}")
    got = sb.get_file("/proctor/harness/h.py")
    _expect(got == b"y = 2\n", f"a read-only file changed to {got!r}")


@_check
def check_read_only_dirs(open_sb: OpenSandbox) -> None:
    """The put_read_only_dirs result equals read-only put_files; fresh directories only."""
    sb = open_sb()
    sb.put_read_only_dirs({"/proctor/h-1": {"t/test_a.py": b"a\n", "c.py": b"c\n"},
                           "/proctor/t-2": {"x.json": b"[]"}, "/proctor/e-3": {}})
    for path, want in (("/proctor/h-1/t/test_a.py", b"a\n"), ("/proctor/t-2/x.json", b"[]")):
        got = sb.get_file(path)
        _expect(got == want, f"get_file({path!r}) returned {got!r}, expected {want!r}")
    sb.put_files("/proctor/r-0", {"t/test_a.py": b"a\n"}, read_only=True)  # the reference
    modes = sb.run(["sh", "-c", "cd /proctor && stat -c '%n %u %a' r-0 r-0/t r-0/t/test_a.py "
                    "h-1 h-1/t h-1/t/test_a.py h-1/c.py t-2 t-2/x.json e-3"], timeout=10).output
    words = modes.split()
    owner = words[1] if len(words) > 1 else "?"  # root as the user sees it (1000 in a userns)
    want = [f"r-0 {owner} 555", f"r-0/t {owner} 555", f"r-0/t/test_a.py {owner} 444",
            f"h-1 {owner} 555", f"h-1/t {owner} 555", f"h-1/t/test_a.py {owner} 444",
            f"h-1/c.py {owner} 444", f"t-2 {owner} 555", f"t-2/x.json {owner} 444",
            f"e-3 {owner} 555"]
    _expect(modes.split("\n")[:10] == want,
            f"owners and modes (stat '%n %u %a') {modes!r}, expected {want!r}")
    tamper = sb.run(["sh", "-c", "echo z > /proctor/h-1/c.py; rm -f /proctor/t-2/x.json; "
                     "touch /proctor/h-1/t/new.py; mv /proctor/h-1 /proctor/y"], timeout=10)
    _expect(tamper.exit_code != 0, f"changing read-only directories succeeded: {_seen(tamper)}")
    got = sb.get_file("/proctor/h-1/c.py")
    _expect(got == b"c\n", f"a read-only file changed to {got!r}")
    listing = sb.run(["ls", "/proctor/t-2", "/proctor/h-1/t"], timeout=10).output.split()
    want_ls = ["/proctor/h-1/t:", "test_a.py", "/proctor/t-2:", "x.json"]
    _expect(listing == want_ls, f"read-only directories now hold {listing}, not {want_ls}")
    try:
        sb.put_read_only_dirs({"/proctor/t-2": {"y": b""}})
    except InfraError:
        pass
    else:
        raise ConformanceError("put_read_only_dirs over an existing directory did not raise "
                               "InfraError")
    got = sb.get_file("/proctor/t-2/y")
    _expect(got is None, f"the refused put_read_only_dirs still wrote /proctor/t-2/y: {got!r}")
    try:
        sb.put_read_only_dirs({"/proctor/a": {}, "/tmp/b": {}})
    except ValueError:
        pass
    else:
        raise ConformanceError("put_read_only_dirs with two parents did not raise ValueError")


# ------------------------------------------------------------------ timeouts


@_check
def check_timeout_kills_tree(open_sb: OpenSandbox) -> None:
    """A timeout kills the whole tree, TERM/ALRM-ignoring and setsid children included."""
    sb = open_sb()
    tag = secrets.token_hex(4)
    stubborn = (f"import signal, time; [signal.signal(s, signal.SIG_IGN) for s in "
                f"(signal.SIGTERM, signal.SIGALRM, signal.SIGHUP, signal.SIGINT)]; "
                f"time.sleep(300)  # {tag}")
    script = (f"trap '' TERM ALRM; {PY} -c '{stubborn}' & "
              f"setsid {PY} -c '{stubborn}' & "
              f"( trap '' TERM; sleep 300 ) & {PY} -c '{stubborn}'")
    start = time.monotonic()
    res = sb.run(["sh", "-c", script], timeout=2)
    took = time.monotonic() - start
    _expect(res.timed_out and res.exit_code in (124, 137),
            f"a 2 s timeout: expected timed_out with exit 124 or 137, saw {_seen(res)}")
    _expect(took < 2 + 3 + 5, f"a 2 s timeout returned after {took:.1f} s (limit 10 s)")
    left = [ln for ln in _procs(sb).splitlines() if tag in ln]
    _expect(not left, f"processes survived the timeout: {left}")
    _runs_again(sb)


def _own_deadline(open_sb: OpenSandbox, stopped: bool) -> None:
    # own_deadline: no `timeout` process holds the command's output (only the command); at
    # the timeout the user's processes are killed from outside, even a SIGSTOPped command
    # (a way to turn a run into a watchdog infra error), and it is timed_out.
    sb = open_sb()
    tag = secrets.token_hex(4)
    script = (f"cat /proc/$PPID/comm 2>/dev/null; {'kill -STOP $$;' if stopped else ''} "
              f"setsid {PY} -c 'import time; time.sleep(300)  # {tag}' & sleep 300")
    start = time.monotonic()
    res = sb.run(["sh", "-c", script], timeout=2, own_deadline=True)
    took = time.monotonic() - start
    _expect(res.timed_out and res.exit_code == 137,
            f"a 2 s own deadline: expected timed_out with exit 137, saw {_seen(res)}")
    _expect("timeout" not in res.output,
            f"a `timeout` process is the command's parent: {res.output!r}")
    _expect(took < 2 + 5, f"a 2 s own deadline returned after {took:.1f} s (limit 7 s)")
    left = [ln for ln in _procs(sb).splitlines() if tag in ln]
    _expect(not left, f"processes survived the deadline: {left}")
    _runs_again(sb)


@_check
def check_own_deadline_running(open_sb: OpenSandbox) -> None:
    """With own_deadline: no wrapper process, and the run still ends at the timeout."""
    _own_deadline(open_sb, stopped=False)


@_check
def check_own_deadline_stopped(open_sb: OpenSandbox) -> None:
    """With own_deadline: a SIGSTOPped command still ends at the timeout."""
    _own_deadline(open_sb, stopped=True)


@_check
def check_zombies_reaped(open_sb: OpenSandbox) -> None:
    """Orphaned children are reaped (no zombies)."""
    sb = open_sb()
    sb.run(["sh", "-c", "for i in 1 2 3; do (sleep 0.1 &) ; done; sleep 1"], timeout=10)
    time.sleep(0.5)
    states = sb.run(["sh", "-c", "grep -h '^State' /proc/[0-9]*/status"], timeout=10).output
    _expect("zombie" not in states, f"zombies left: {states!r}")


# ------------------------------------------------------------------ network


def _no_network(open_sb: OpenSandbox, address: str) -> None:
    sb = open_sb()
    code = (f"import socket; s = socket.socket(); s.settimeout(3); s.connect(('{address}', 80));"
            f" print('CONNECTED')")
    res = sb.run([PY, "-c", code], timeout=15)
    _expect(res.exit_code != 0 and "CONNECTED" not in res.output,
            f"a TCP connect to {address}:80 did not fail: {_seen(res)}")
    # refused or unreachable at once: no route out of the sandbox
    _expect(res.duration_s < 5, f"the connect to {address} failed only after "
            f"{res.duration_s:.1f} s (a route out exists?): {_seen(res)}")
    ifaces = sb.run(["cat", "/proc/net/dev"], timeout=10).output
    names = [ln.split(":")[0].strip() for ln in ifaces.splitlines()[2:]]
    _expect(names in ([], ["lo"]), f"network interfaces {names}, expected none or only lo")


@_check
def check_no_network_loopback(open_sb: OpenSandbox) -> None:
    """No network: a connect to 127.0.0.1 fails at once; no interface but lo."""
    _no_network(open_sb, "127.0.0.1")


@_check
def check_no_network_outside(open_sb: OpenSandbox) -> None:
    """No network: a connect to 10.255.255.1 fails at once; no interface but lo."""
    _no_network(open_sb, "10.255.255.1")


# ------------------------------------------------------------------ limits


@_check
def check_memory_one_process(open_sb: OpenSandbox) -> None:
    """Memory 256 MiB: a 512 MiB allocation fails, the sandbox survives."""
    sb = open_sb(Limits(memory_bytes=256 * MiB))
    res = sb.run([PY, "-c", "b = bytearray(512 * 1024**2); b[::4096] = b'x' * len(b[::4096]);"
                  " print('ALLOCATED')"], timeout=60)
    _expect(res.exit_code != 0 and "ALLOCATED" not in res.output,
            f"512 MiB were allocated under a 256 MiB limit: {_seen(res)}")
    _runs_again(sb)


@_check
def check_memory_process_tree(open_sb: OpenSandbox) -> None:
    """Memory 256 MiB covers the whole tree: 4 x 100 MiB do not all fit."""
    sb = open_sb(Limits(memory_bytes=256 * MiB))
    _require(sb, "memory")
    hog = ("import time; b = bytearray(100 * 1024**2); b[::4096] = b'x' * len(b[::4096]); "
           "time.sleep(3); print('HELD')")
    res = sb.run(["sh", "-c", f"for i in 1 2 3 4; do {PY} -c \"{hog}\" & done; wait"],
                 timeout=30)
    _expect(res.output.count("HELD") < 4,
            f"4 processes held 100 MiB each under a 256 MiB limit: {_seen(res)}")
    _runs_again(sb)


@_check
def check_pids_fork_bomb(open_sb: OpenSandbox) -> None:
    """Pids 64: 200 background sleeps hit the limit; a fork bomb times out and the sandbox
    recovers."""
    sb = open_sb(Limits(pids=64))
    _require(sb, "pids")
    res = sb.run(["sh", "-c", "for i in $(seq 200); do sleep 5 & done; wait"], timeout=20)
    _expect("fork" in res.output.lower() or "resource" in res.output.lower(),
            f"200 processes under a pids limit of 64 saw no fork/resource error: {_seen(res)}")
    sb.kill_user_processes()  # the sleeps it did start hold pids; the harness does this too
    bomb = ("import os, time\nwhile True:\n    try:\n        os.fork()\n"
            "    except OSError:\n        time.sleep(0.01)\n")
    start = time.monotonic()
    res = sb.run([PY, "-c", bomb], timeout=3)
    took = time.monotonic() - start
    _expect(res.timed_out and took < 3 + 3 + 5,
            f"a fork bomb with a 3 s timeout: expected timed_out within 11 s, saw {_seen(res)}"
            f" after {took:.1f} s")
    _expect(_recovers(sb), "the sandbox ran no command within 15 s after the fork bomb")


@_check
def check_file_size(open_sb: OpenSandbox) -> None:
    """File size 8 MiB: writing a 20 MB file fails at 8 MiB."""
    sb = open_sb(Limits(file_size_bytes=8 * MiB))
    _require(sb, "file_size")
    res = sb.run(["sh", "-c", "head -c 20000000 /dev/zero > /tmp/big"], timeout=30)
    _expect(res.exit_code != 0, f"a 20 MB file was written under an 8 MiB limit: {_seen(res)}")
    size = sb.run(["stat", "-c", "%s", "/tmp/big"], timeout=10).output.strip()
    _expect(size.isdigit() and int(size) <= 8 * MiB,
            f"/tmp/big is {size!r} bytes, limit {8 * MiB}")


def _disk_fill(open_sb: OpenSandbox, where: str) -> None:
    sb = open_sb(Limits(disk_bytes=48 * MiB, tmp_bytes=48 * MiB, file_size_bytes=8 * MiB))
    _require(sb, "disk")
    res = sb.run(["sh", "-c", f"i=0; while [ $i -lt 40 ]; do head -c 4000000 /dev/zero > "
                  f"{where}/f$i || exit 7; i=$((i+1)); done"], timeout=60)
    _expect(res.exit_code == 7 and "space" in res.output.lower(),
            f"writing 160 MB into a 48 MiB {where}: expected exit 7 and a no-space error, "
            f"saw {_seen(res)}")
    used = sb.run(["sh", "-c", f"du -sk {where}"], timeout=10).output.split()[:1]
    _expect(used and used[0].isdigit() and int(used[0]) * 1024 <= 48 * MiB + MiB,
            f"{where} holds {used} KiB, limit 48 MiB")
    _runs_again(sb)


@_check
def check_disk_fill_work(open_sb: OpenSandbox) -> None:
    """Disk 48 MiB: filling /work stops with no space, the sandbox survives."""
    _disk_fill(open_sb, "/work")


@_check
def check_disk_fill_tmp(open_sb: OpenSandbox) -> None:
    """Tmp 48 MiB: filling /tmp stops with no space, the sandbox survives."""
    _disk_fill(open_sb, "/tmp")


# ------------------------------------------------------------------ output


@_check
def check_output_capped(open_sb: OpenSandbox) -> None:
    """Output cap 1000: 100000 bytes keep the first 1000 and a marker."""
    sb = open_sb(Limits(output_cap=1000))
    res = sb.run(["sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x"], timeout=10)
    _expect(res.truncated and res.output.startswith("x" * 1000),
            f"expected truncated output starting with 1000 x: {_seen(res)}")
    _expect("99000 more bytes dropped" in res.output,
            f"no '99000 more bytes dropped' marker: {_seen(res)}")


@_check
def check_huge_output_streamed(open_sb: OpenSandbox) -> None:
    """300 MB of output are streamed: under 32 MiB of host memory (tracemalloc)."""
    sb = open_sb(Limits(output_cap=64 * 1024))
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        res = sb.run(["sh", "-c", "head -c 300000000 /dev/zero"], timeout=60)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if not tracing:
            tracemalloc.stop()
    marker = f"{300000000 - 64 * 1024} more bytes dropped"
    _expect(res.truncated and marker in res.output,
            f"expected truncated output with {marker!r}: {_seen(res)}")
    _expect(peak - base < 32 * MiB,
            f"the host held {(peak - base) / MiB:.0f} MiB while reading 300 MB (limit 32 MiB)")


# ------------------------------------------------------------------ host directories


@_check
def check_mounted_dir_read_only(open_sb: OpenSandbox) -> None:
    """A mounted host directory is visible and read-only to the user and root; the host copy is
    unchanged."""
    host = Path(tempfile.mkdtemp(prefix="conformance-mount-"))
    try:
        (host / "h").mkdir()
        (host / "h" / "a.py").write_text("print('harness')\n")
        with open_sb(mounts={"/proctor/harness": host / "h"}) as sb:
            res = sb.run([PY, "-I", "-B", "/proctor/harness/a.py"], timeout=30)
            _expect(res.output == "harness\n", f"running the mounted a.py: {_seen(res)}")
            for user in (None, "0:0"):
                res = sb.run(["sh", "-c", "{ echo x > /proctor/harness/a.py || "
                              "rm -f /proctor/harness/a.py || touch /proctor/harness/b; "
                              "chmod -R a+w /proctor/harness; } 2>/dev/null; "
                              "cat /proctor/harness/a.py; ls /proctor/harness"], timeout=30,
                             user=user)
                _expect(res.output == "print('harness')\na.py\n",
                        f"as {user or 'the sandbox user'}, after trying to change the mount: "
                        f"{res.output!r}")
            sb.put_files("/proctor/out", {"r.txt": b"1"})  # the other areas still work
        text = (host / "h" / "a.py").read_text()
        _expect(text == "print('harness')\n", f"the host file changed to {text!r}")
        names = sorted(p.name for p in (host / "h").iterdir())
        _expect(names == ["a.py"], f"the host directory now holds {names}")
    finally:
        shutil.rmtree(host, ignore_errors=True)


# ------------------------------------------------------------------ standard input


@_check
def check_stdin_bytes(open_sb: OpenSandbox) -> None:
    """3 MiB of stdin reach the command; output written before reading does not block."""
    sb = open_sb()
    data = secrets.token_bytes(3 * MiB)
    res = sb.run(["sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x; sha256sum"], timeout=30,
                 stdin=data)
    want = f"{hashlib.sha256(data).hexdigest()}  -\n"
    _expect(res.ok and res.output.endswith(want),
            f"expected success ending with the input's sha256 {want!r}: {_seen(res, 100)}")


@_check
def check_stdin_unread(open_sb: OpenSandbox) -> None:
    """A command that does not read its 4 MiB stdin ends normally."""
    res = open_sb().run(["sh", "-c", "exit 3"], timeout=30, stdin=b"x" * (4 * MiB))
    _expect(res.exit_code == 3 and not res.timed_out, f"expected exit 3: {_seen(res)}")


@_check
def check_stdin_chunks(open_sb: OpenSandbox) -> None:
    """Stdin chunks arrive as they are yielded; the input closes after."""
    sb = open_sb()
    go = threading.Event()

    def chunks():
        yield b"first\n"
        go.wait(10)  # the command is already running and blocks on its read meanwhile
        yield b"second\n"

    threading.Timer(0.5, go.set).start()
    res = sb.run(["sh", "-c", "read a; echo got $a; cat"], timeout=30, stdin=chunks())
    _expect(res.ok and res.output == "got first\nsecond\n",
            f"expected success with 'got first\\nsecond\\n': {_seen(res)}")


@_check
def check_stdin_empty(open_sb: OpenSandbox) -> None:
    """Without input, stdin is empty."""
    res = open_sb().run(["sh", "-c", "cat; echo end"], timeout=10)
    _expect(res.ok and res.output == "end\n", f"expected success with 'end\\n': {_seen(res)}")


# ------------------------------------------------------------------ isolation, cleanup


@_check
def check_nothing_leaks(open_sb: OpenSandbox) -> None:
    """Nothing written inside reaches the host or the next sandbox."""
    token = secrets.token_hex(8)
    sb = open_sb()
    write = sb.run(["sh", "-c", f"for d in /tmp /work $HOME /proctor/out; do "
                    f"echo {token} > $d/leak-{token}; done"], timeout=10)
    _expect(write.ok, f"writing to /tmp, /work, $HOME, /proctor/out failed: {_seen(write)}")
    for d in ("/tmp", "/work", str(Path.home()), "/proctor/out"):
        _expect(not Path(d, f"leak-{token}").exists(),
                f"a file written inside appeared on the host: {Path(d, f'leak-{token}')}")
    sb2 = open_sb()
    res = sb2.run(["sh", "-c", f"cat /tmp/leak-{token} /work/leak-{token} "
                   f"$HOME/leak-{token} /proctor/out/leak-{token}"], timeout=10)
    _expect(res.exit_code != 0 and token not in res.output.replace(f"leak-{token}", ""),
            f"the next sandbox read what the first one wrote: {_seen(res)}")


@_check
def check_close_leaves_nothing(open_sb: OpenSandbox) -> None:
    """Close (idempotent) leaves nothing running or on disk."""
    sb = open_sb()
    res = sb.run(["sh", "-c", "setsid sleep 300 & echo x > /work/x"], timeout=10)
    _expect(res.ok, f"starting a daemon and writing /work/x failed: {_seen(res)}")
    _expect(sb.leftovers(), "leftovers() is empty while the sandbox is open")
    sb.close()
    sb.close()  # idempotent
    left = sb.leftovers()
    _expect(left == [], f"after close, leftovers() = {left}")


# ------------------------------------------------------------------ running them


def _where(exc: BaseException) -> str:
    """``file:line`` of the innermost frame of this module in ``exc``'s traceback."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if f.filename == __file__ and f.name != "_expect"]
    return f" (at {Path(__file__).name}:{frames[-1].lineno})" if frames else ""


def _run_one(check: Check, backend: str, open_sb: OpenSandbox,
             opened: list[Sandbox]) -> CheckResult:
    """Run ``check`` with ``open_sb`` (which appends every sandbox it opens to ``opened``),
    then close those sandboxes. Never raises for the check's outcome: an exception other
    than :class:`ConformanceError` or :class:`CheckSkipped` (``InfraError`` from the
    backend, say) is a failure whose message names it; so is a ``close`` that raises or
    leaves something behind (:meth:`Sandbox.leftovers`)."""
    start = time.monotonic()
    status: Literal["passed", "failed", "skipped"] = "passed"
    message = ""
    try:
        check.func(open_sb)
    except CheckSkipped as exc:
        status, message = "skipped", str(exc)
    except ConformanceError as exc:
        status, message = "failed", f"{exc}{_where(exc)}"
    except Exception as exc:  # noqa: BLE001 - any error of the backend is a failed check
        status, message = "failed", f"{type(exc).__name__}: {exc}{_where(exc)}"
    finally:
        for sb in opened:
            try:
                sb.close()
                left = sb.leftovers()
            except Exception as exc:  # noqa: BLE001
                if status != "failed":
                    status, message = "failed", f"close raised {type(exc).__name__}: {exc}"
                continue
            if left and status != "failed":  # every check keeps the close promise too
                status, message = "failed", f"after close, leftovers() = {left}"
    return CheckResult(check.name, backend, status, message, time.monotonic() - start)


def run_conformance(backend: str, env: str | None = None, *,
                    only: Iterable[str] | None = None,
                    on_result: Callable[[CheckResult], None] | None = None
                    ) -> list[CheckResult]:
    """Run the checks (all of :data:`CHECKS`, or those named in ``only``, in
    :data:`CHECKS` order) on ``backend``, each in fresh sandboxes built as
    ``BACKENDS[backend](env, limits=..., mounts=...)`` and closed after it, whatever
    happened. ``env``: what the backend is built from; None resolves the default one
    (:func:`proctor.sandbox.backends.resolve_env`: the sandbox image, the local tools venv).
    ``on_result`` is called with each result as it is known (progress).

    Returns one :class:`CheckResult` per check run, in order. A check's failure is a
    ``failed`` result, never an exception.

    Raises:
        ValueError: ``backend`` is not registered, or ``only`` names an unknown check.
        ImageMissing / EngineUnavailable / InfraError / TaskConfigError: ``env`` is None and
            the default environment cannot be resolved (:func:`resolve_env`).
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {backend!r}; known: "
                         f"{', '.join(sorted(BACKENDS))}")
    names = list(only) if only is not None else list(CHECKS)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ValueError(f"unknown conformance check(s) {', '.join(unknown)}; known: "
                         f"{', '.join(CHECKS)}")
    if env is None:
        try:
            env = resolve_env(backend)[0]
        except TaskConfigError as exc:  # a backend resolve_env does not know
            raise TaskConfigError(f"{exc}: pass the environment {backend!r} is built "
                                  "from") from None
    results = []
    for check in (c for c in CHECKS.values() if c.name in names):
        opened: list[Sandbox] = []

        def open_sb(limits: Limits | None = None, mounts: dict[str, Path] | None = None,
                    _opened: list[Sandbox] = opened) -> Sandbox:
            sb = BACKENDS[backend](env, limits=limits or Limits(), mounts=mounts or {})
            _opened.append(sb)
            return sb

        result = _run_one(check, backend, open_sb, opened)
        if on_result is not None:
            on_result(result)
        results.append(result)
    return results
