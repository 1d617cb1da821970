"""Several of the harness's own commands in one sandbox command.

Each sandbox command costs the machine real CPU (a ``docker exec``: ~36 ms of dockerd, runc
and the shim), so harness steps that run one after the other as the same user go better as
one command. Each step still gets what a command of its own gets: its argv, working
directory and standard input, its own ``timeout -k``, and an
:class:`~proctor.sandbox.base.ExecResult` of its own (exit code, merged output, run time
measured in the sandbox, ``timed_out`` by the backends' rule). The steps' outputs are told
apart by markers with a fresh nonce, which nothing the steps print can know.

Only for the harness's own steps (checkers, copies), never for code of the patch: a step's
timeout ends its process group, not processes that left it, and the command's output cap
is shared (:func:`run_steps` reruns a step whose output it cut).
"""

from __future__ import annotations

import re
import secrets
import shlex
from dataclasses import dataclass

from proctor.errors import InfraError
from proctor.sandbox.base import TIMEOUT_EXIT_CODES, ExecResult, Sandbox, tar_of_files
from proctor.sandbox.layout import KILL_AFTER_S, STEPS_SLACK_S


@dataclass(frozen=True)
class Step:
    """``argv`` run in ``cwd`` with ``stdin`` (bytes; None: empty) under ``timeout -k`` of
    ``timeout`` seconds. ``name``: unique among the steps (letters, digits, ``_``).
    ``required``: when it fails (non-zero exit or timed out), the steps after it do not
    run."""

    name: str
    argv: list[str]
    timeout: float
    cwd: str = "/work"
    stdin: bytes | None = None
    required: bool = False

    @property
    def command(self) -> str:
        """``argv`` joined with spaces, as :attr:`ExecResult.command` has it (for
        messages)."""
        return " ".join(self.argv)


def run_steps(sb: Sandbox, steps: list[Step], *, workdir: str,
              user: str | None = None) -> dict[str, ExecResult | None]:
    """Run ``steps`` in order, as ``user``, in one sandbox command: step name -> its result,
    or None when it did not run (a required step before it failed) or its output could not
    be read (cut at the output cap even when run again).

    ``workdir``: an absolute path that must not exist yet (e.g. under ``/tmp``); the command
    makes it (mode 0700), puts the steps' inputs there, and removes it when it ends, so a
    step may use it as scratch (another step's output, say). A step whose result the shared
    output cap cut runs again in a command of its own, after the required steps before it.

    Raises:
        ValueError: two steps share a name, or a name is not a word.
        InfraError: the sandbox failed, or the command failed or timed out around its steps
            (``workdir`` existed, say).
    """
    names = [s.name for s in steps]
    if len(set(names)) != len(names) or not all(re.fullmatch(r"\w+", n) for n in names):
        raise ValueError(f"step names must be unique words: {names}")
    results, cut = _run_once(sb, steps, workdir, user)
    if not cut:
        return results
    for i, step in enumerate(steps):
        earlier = [results[s.name] for s in steps[:i] if s.required]
        if results[step.name] is not None or any(r is not None and not _ok(r)
                                                 for r in earlier):
            continue
        alone = [s for s in steps[:i] if s.required] + [step]
        results[step.name] = _run_once(sb, alone, workdir, user)[0][step.name]
    return results


def _ok(res: ExecResult) -> bool:
    return res.exit_code == 0 and not res.timed_out


def _run_once(sb: Sandbox, steps: list[Step], workdir: str, user: str | None
              ) -> tuple[dict[str, ExecResult | None], bool]:
    """One command: (results, whether its output was cut at the cap)."""
    token = secrets.token_hex(8)
    w = shlex.quote(workdir)
    lines = [
        "set -u", f"mkdir -m 700 -- {w} || exit 90", f"trap 'rm -rf -- {w}' EXIT",
        f"tar -x --no-same-permissions -C {w} -f - || exit 90",
        # step NAME TIMEOUT CWD STDIN ARGV...: markers with the start and end clock (ns)
        f'step() {{ n=$1 t=$2 d=$3 i=$4; shift 4; echo "@@proctor-{token} begin $n '
        f'$(date +%s%N)"; (cd "$d" && exec timeout -k {KILL_AFTER_S} "$t" "$@" <"$i") 2>&1; '
        f'c=$?; echo; echo "@@proctor-{token} end $n $c $(date +%s%N)"; return $c; }}',
    ]
    inputs = {}
    for i, s in enumerate(steps):
        stdin = "/dev/null"
        if s.stdin is not None:
            inputs[f"in/{i}"] = s.stdin
            stdin = f"{workdir}/in/{i}"
        call = shlex.join(["step", s.name, f"{max(s.timeout, 0.1):.1f}", s.cwd, stdin,
                           *s.argv])
        lines.append(f"{call} || exit 0" if s.required else call)
    lines.append("exit 0")
    timeout = sum(s.timeout + KILL_AFTER_S + 1 for s in steps) + STEPS_SLACK_S
    res = sb.run(["sh", "-c", "\n".join(lines)], timeout=timeout, cwd="/", user=user,
                 stdin=tar_of_files(inputs))
    if res.timed_out or res.exit_code != 0:
        raise InfraError(f"sandbox steps {', '.join(s.name for s in steps)} failed "
                         f"(exit {res.exit_code}{', timed out' if res.timed_out else ''}): "
                         f"{res.output[-1000:]}")
    found = {m["name"]: m for m in re.finditer(
        rf"@@proctor-{token} begin (?P<name>\w+) (?P<t0>\d+)\n(?P<out>.*?)\n"
        rf"@@proctor-{token} end (?P=name) (?P<code>-?\d+) (?P<t1>\d+)\n", res.output, re.S)}
    results: dict[str, ExecResult | None] = {}
    for s in steps:
        m = found.get(s.name)
        if m is None:
            results[s.name] = None
            continue
        code, duration = int(m["code"]), max(0.0, (int(m["t1"]) - int(m["t0"])) / 1e9)
        timed_out = code in TIMEOUT_EXIT_CODES and duration >= s.timeout - 0.5
        results[s.name] = ExecResult(tuple(s.argv), code, m["out"], duration, timed_out)
    return results, res.truncated


#: Shell: for each path in ``"$@"`` (relative), remove any parent that is not a real
#: directory (a file or a symlink the patch put there), top down, so the pristine copy can
#: go back (a file named like a public test directory would make the restore fail,
#: an unscored ``error``).
CLEAR_PARENTS_SH = (
    'for p in "$@"; do rest=$p; cur=; '
    'while case $rest in */*) true;; *) false;; esac; do '
    'cur=${cur:+$cur/}${rest%%/*}; rest=${rest#*/}; '
    'if [ -L "$cur" ] || { [ -e "$cur" ] && [ ! -d "$cur" ]; }; then rm -f -- "$cur"; fi; '
    'done; done')
