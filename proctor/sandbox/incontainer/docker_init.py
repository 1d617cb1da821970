"""PID 1 of every Docker sandbox, run as the sandbox user (``python3 -I -S -c SOURCE SOFT
HARD``; the image's python3, standard library only; ``SOFT HARD``: the commands' RLIMIT_CPU
in seconds, ``0 0`` for none).

It reaps every orphan (no zombies), and on SIGUSR1 (sent by the engine, so it works even
when the pids limit leaves no room to start a command) SIGKILLs every other process of the
sandbox user. Signals from inside the container cannot reach it: it is PID 1 of its
namespace, and the only signal it handles is SIGUSR1, which only kills the user's own
processes. The engine's SIGKILL on removal ends it. It has no CPU limit of its own (the
container has none; the commands get theirs from it), so no work the code under test makes
it do can get it killed.

It also runs the harness's commands for the sandbox user, one at a time, over its stdin and
stdout (the container's attach stream), for the price of a few bytes each where a
``docker exec`` costs the engine a process setup. It is non-dumpable, so the code under
test (same user) can neither read nor write its ``/proc/1/fd`` nor attach to it: nothing
but the engine reaches the channel. Frames, both ways: one kind byte, a 4-byte big-endian
request number, a 4-byte big-endian length, the payload.

- host -> init: ``H`` hello (answered with ``H`` JSON ``{"secure"}``: whether it is
  non-dumpable; the host uses the channel only then); ``R`` a command, JSON ``{"argv",
  "env", "cwd", "stdin", "cap"}`` (``stdin`` true: ``I`` frames follow, an empty one closes
  the command's input; false: it reads /dev/null; ``cap``: output bytes forwarded, the rest
  counted);
- init -> host: ``O`` output (stdout and stderr merged), then ``X`` JSON ``{"exit",
  "dropped"}`` once the command has exited and its output is closed; ``exit`` is the exit
  status, or 128 + the signal that killed it, 126 when the program could not be started
  (as ``docker exec`` reports it).

Each command runs in a session of its own, in the container's environment plus
``env``, with the signal dispositions and CPU limit a ``docker exec`` would give it.
"""

import ctypes
import json
import os
import resource
import select
import signal
import struct
import sys
import time

HEAD = struct.Struct(">cII")
PR_GET_DUMPABLE, PR_SET_DUMPABLE = 3, 4
#: Bytes of the command's input held here while it does not read them.
INPUT_HELD_MAX = 1 << 20
#: Seconds the output of a command that exited stays open to processes it left behind
#: (what ``docker exec`` waits, about): then the command is over, whoever holds its output.
OUTPUT_GRACE_S = 2.0
#: Seconds between looks for the command's exit: in the first EXIT_POLL_FOR_S after its
#: output closed (it is exiting, most likely), and otherwise (its output still open, or
#: closed by a command that goes on). No SIGCHLD handler: one would let the code under test
#: signal PID 1.
EXIT_POLL_S, EXIT_POLL_FOR_S, RUNNING_POLL_S = 0.002, 0.1, 0.05


def killall(*_):
    """SIGUSR1: SIGKILL every process of the user but this one."""
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass


def send(kind, number, payload):
    """One frame to the host."""
    data = HEAD.pack(kind, number, len(payload)) + payload
    while data:
        data = data[os.write(1, data):]


class Command:
    def __init__(self, number, request, cpu_limit):
        self.number = number
        self.cap = int(request.get("cap", 1 << 18))
        self.sent = self.dropped = 0
        self.status = None
        self.exited_at = self.out_closed_at = None
        self.pending = bytearray()
        self.input_open = bool(request.get("stdin"))
        env = dict(os.environ)
        env.update(request.get("env") or {})
        out_r, out_w = os.pipe()
        in_r = in_w = None
        try:
            if self.input_open:
                in_r, in_w = os.pipe()
            pid = os.fork()
        except OSError:
            for fd in (out_r, out_w, in_r, in_w):
                if fd is not None:
                    os.close(fd)
            raise
        if pid == 0:  # the command: no return from here
            try:
                os.setsid()  # as runc starts every process of a docker exec
                for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGUSR1):
                    signal.signal(sig, signal.SIG_DFL)
                if cpu_limit is not None:
                    resource.setrlimit(resource.RLIMIT_CPU, cpu_limit)
                os.dup2(in_r if in_r is not None else os.open(os.devnull, os.O_RDONLY), 0)
                os.dup2(out_w, 1)
                os.dup2(out_w, 2)
                if request.get("cwd"):
                    os.chdir(request["cwd"])
                argv = request["argv"]
                os.execvpe(argv[0], argv, env)
            except BaseException as exc:  # noqa: BLE001 - report and leave
                try:
                    os.write(2, f"proctor init: cannot run {request['argv'][:1]}: "
                                f"{exc}\n".encode(errors="replace"))
                finally:
                    os._exit(126)  # as ``docker exec`` reports any program it cannot start
        self.pid = pid
        os.close(out_w)
        # never blocks: a process of the user that opened the pipe too (through a dumpable
        # holder's /proc/PID/fd) may empty it between the select and the read
        os.set_blocking(out_r, False)
        self.out = out_r
        self.input = None
        if in_r is not None:
            os.close(in_r)
            self.input = in_w
            os.set_blocking(in_w, False)

    def forward(self):
        """Forward what the command's output holds now (up to 1 MiB, so a flood still
        leaves turns to the input); closes it at its end."""
        for _ in range(16):
            if self.out is None:
                return
            try:
                data = os.read(self.out, 65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                os.close(self.out)
                self.out = None
                self.out_closed_at = time.monotonic()
                return
            room = max(0, self.cap - self.sent)
            if room:
                send(b"O", self.number, data[:room])
                self.sent += min(room, len(data))
            self.dropped += max(0, len(data) - room)

    def feed(self, chunk):
        """Queue input bytes; an empty chunk closes the input after what is queued."""
        if self.input is None:
            return
        if chunk:
            self.pending += chunk
        else:
            self.input_open = False
        self.write_input()

    def write_input(self):
        if self.input is None:
            return
        try:
            while self.pending:
                n = os.write(self.input, self.pending[:65536])
                del self.pending[:n]
        except BlockingIOError:
            return
        except OSError:  # the command closed its input: what is left is dropped
            self.pending.clear()
            self.input_open = False
        if not self.pending and not self.input_open:
            os.close(self.input)
            self.input = None

    def finished(self):
        if self.status is not None and self.out is not None and (
                time.monotonic() - self.exited_at >= OUTPUT_GRACE_S):
            self.forward()  # what is there now, then nobody's: processes left behind hold it
            if self.out is not None:
                os.close(self.out)
                self.out = None
        return self.status is not None and self.out is None

    def wait_s(self):
        """Seconds the loop may sleep before it looks at this command again."""
        if self.status is None:
            if self.out is None and time.monotonic() - self.out_closed_at < EXIT_POLL_FOR_S:
                return EXIT_POLL_S
            return RUNNING_POLL_S
        return min(RUNNING_POLL_S, max(0.0, OUTPUT_GRACE_S - (time.monotonic() - self.exited_at)))

    def report(self):
        if self.input is not None:
            os.close(self.input)
            self.input = None
        if os.WIFSIGNALED(self.status):
            code = 128 + os.WTERMSIG(self.status)
        else:
            code = os.WEXITSTATUS(self.status)
        send(b"X", self.number, json.dumps({"exit": code, "dropped": self.dropped}).encode())


def reap(command):
    """Reap every child that exited; note the running command's status."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if command is not None and pid == command.pid:
            command.status = status
            command.exited_at = time.monotonic()


def take_frames(inbox, command, cpu_limit, secure):
    """Act on every whole frame in ``inbox`` (consumed); returns the running command."""
    while len(inbox) >= HEAD.size:
        kind, number, size = HEAD.unpack_from(inbox)
        if len(inbox) < HEAD.size + size:
            break
        payload = bytes(inbox[HEAD.size:HEAD.size + size])
        del inbox[:HEAD.size + size]
        if kind == b"H":
            send(b"H", number, json.dumps({"secure": secure}).encode())
        elif kind == b"R" and command is None and secure:
            try:
                command = Command(number, json.loads(payload), cpu_limit)
            except Exception as exc:  # noqa: BLE001 - no pid or fd left (a fork bomb), say
                send(b"O", number, f"proctor init: cannot start the command: {exc}\n"
                     .encode(errors="replace"))
                send(b"X", number, json.dumps({"exit": 126, "dropped": 0}).encode())
        elif kind == b"I" and command is not None and command.number == number:
            command.feed(payload)
    return command


def setup():
    """Non-dumpable, signal handlers; returns (the commands' CPU limit or None, whether
    this process is non-dumpable)."""
    libc = ctypes.CDLL(None, use_errno=True)
    secure = (libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
              and libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0)
    # no handler but SIGUSR1's: Python's SIGINT handler would let `kill -INT 1` from the
    # code under test end PID 1, and with it the sandbox
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGUSR1, killall)
    soft, hard = (int(x) for x in (sys.argv[1:3] if len(sys.argv) >= 3 else (0, 0)))
    return ((soft, hard) if soft else None), secure


def main():
    cpu_limit, secure = setup()
    inbox = bytearray()
    command = None
    stdin_open = True
    while True:
        reap(command)
        if command is not None and command.finished():
            command.report()
            command = None
        wait = 1.0 if command is None else command.wait_s()
        readers, writers = [], []
        if stdin_open and (command is None or len(command.pending) < INPUT_HELD_MAX):
            readers.append(0)
        if command is not None:
            if command.out is not None:
                readers.append(command.out)
            if command.input is not None and command.pending:
                writers.append(command.input)
        ready, writable, _ = select.select(readers, writers, [], wait)
        if command is not None and command.input in writable:
            command.write_input()
        if command is not None and command.out in ready:
            command.forward()
        if 0 in ready:
            data = os.read(0, 65536)
            if not data:  # the host went away: go on reaping until the engine removes us
                stdin_open = False
            inbox += data
            command = take_frames(inbox, command, cpu_limit, secure)


main()
