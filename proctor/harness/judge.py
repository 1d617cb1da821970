"""An optional judge (an LLM, a reviewer's script) that may only veto a scored record.

Deterministic code decides every reward; a judge runs after it, and only when the
deterministic gate is not FAIL (otherwise the record says the judge was skipped, and it is
never called). It is a command (``proctor score --judge CMD``; argv, no shell) or a Python
entry point ``module:function`` (run in a child interpreter, so a timeout can end it). It
receives one JSON object on stdin (the entry point: as its argument):

    {"record": <the reward record as JSON>, "diff": <the patch text>,
     "message": <the agent's message or null>}

and answers ``{"veto": bool, "reason": str}`` (the last line of stdout that is a JSON
object; the entry point returns the dict). A veto turns the gate to FAIL (blocker ``judge
veto: REASON``) and caps the reward at the task's ``[judge] veto_cap`` (default 0.0): it
can lower a reward, never raise one; ``measurements.reward_cap`` keeps the cap, so the
record regrades the same. ``flags.judge_veto`` tells the trainer. A judge that fails,
answers something else, or runs past its timeout changes nothing, and the record says so.
``evidence["judge"]`` holds the command, seconds, exit code, output tail and the decision
with its provenance (``judge``).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass

from proctor.record import Evidence, RewardRecord
from proctor.rewards import gate_verdict

DEFAULT_TIMEOUT_S = 60.0
OUTPUT_TAIL = 2000
#: The child interpreter's program for an entry point ``module:function``.
_ENTRY = ("import importlib, json, sys\n"
          "mod, _, fn = sys.argv[1].partition(':')\n"
          "answer = getattr(importlib.import_module(mod), fn)(json.load(sys.stdin))\n"
          "print(json.dumps(answer))\n")


@dataclass(frozen=True)
class Judge:
    """How to call the judge: ``command`` (argv) or ``entry_point`` (``module:function``),
    each within ``timeout_s`` seconds.

    Raises:
        ValueError: neither or both given, an empty command, an entry point without
            ``:``, or a timeout that is not positive.
    """

    command: tuple[str, ...] | None = None
    entry_point: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S

    def __post_init__(self) -> None:
        if (self.command is None) == (self.entry_point is None):
            raise ValueError("a judge is a command or an entry point (one of them)")
        if self.command is not None and not self.command:
            raise ValueError("the judge command is empty")
        if self.entry_point is not None and ":" not in self.entry_point:
            raise ValueError(f"judge entry point {self.entry_point!r} is not module:function")
        if not self.timeout_s > 0:
            raise ValueError(f"judge timeout must be positive, got {self.timeout_s}")

    @classmethod
    def from_options(cls, command: str | None, entry: str | None,
                     timeout_s: float = DEFAULT_TIMEOUT_S) -> Judge | None:
        """The judge of the CLI's ``--judge CMD`` (split like a shell line, run without
        one) / ``--judge-entry module:function``, or None when neither is given.

        Raises:
            ValueError: as the constructor, or a command that does not split.
        """
        if command is None and entry is None:
            return None
        return cls(tuple(shlex.split(command)) if command is not None else None, entry,
                   timeout_s)

    def argv(self) -> list[str]:
        """The child process's argv."""
        if self.command is not None:
            return list(self.command)
        return [sys.executable, "-c", _ENTRY, str(self.entry_point)]


def _skip(rec: RewardRecord, why: str) -> RewardRecord:
    rec.evidence["judge"] = Evidence(command="judge", details={
        "ran": False, "why": why, "calls": 0, "provenance": "judge"})
    return rec


def _answer(stdout: str) -> dict | None:
    """The last line of ``stdout`` that is a JSON object with a bool ``veto``."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get("veto"), bool):
            return value
    return None


def judge_record(rec: RewardRecord, judge: Judge, diff: str, message: str | None,
                 veto_cap: float = 0.0) -> RewardRecord:
    """``rec`` judged (module docstring): skipped unless it is scored with a gate that is
    not FAIL; else one call of ``judge``, whose veto caps the reward at ``veto_cap`` and
    fails the gate. Never raises for the judge's faults."""
    if rec.status != "scored" or rec.verdict is None:
        return _skip(rec, f"the record is not scored ({rec.status})")
    if rec.verdict.gate == "FAIL":
        return _skip(rec, f"the deterministic gate is FAIL ({rec.verdict.rule})")
    payload = json.dumps({"record": json.loads(rec.to_json()), "diff": diff,
                          "message": message})
    argv = judge.argv()
    shown = " ".join(judge.command) if judge.command else f"entry point {judge.entry_point}"
    started = time.monotonic()
    details: dict = {"ran": True, "calls": 1, "provenance": "judge"}
    code, output = None, ""
    try:
        done = subprocess.run(argv, input=payload, capture_output=True, text=True,
                              timeout=judge.timeout_s, check=False)
        code, output = done.returncode, done.stdout
        answer = _answer(done.stdout) if done.returncode == 0 else None
        if done.returncode != 0:
            details["why"] = (f"the judge exited {done.returncode}: "
                              f"{done.stderr.strip()[-300:]}")
        elif answer is None:
            details["why"] = 'the judge answered no {"veto": bool, "reason": str} line'
    except subprocess.TimeoutExpired:
        answer, details["why"] = None, f"the judge ran past its {judge.timeout_s:g} s"
    except OSError as exc:
        answer, details["why"] = None, f"the judge could not start: {exc}"
    seconds = round(time.monotonic() - started, 3)
    rec.timing["judge_s"] = seconds
    if answer is None:
        details["decision"] = "none: the record is as the deterministic checks left it"
    else:
        reason = str(answer.get("reason") or "")[:500]
        details.update(veto=answer["veto"], reason=reason)
        if answer["veto"]:
            _veto(rec, reason, veto_cap)
            details["decision"] = f"veto: reward capped at {veto_cap:g}, gate FAIL"
        else:
            details["decision"] = "no veto: nothing changes"
    rec.evidence["judge"] = Evidence(command=shown, exit_code=code, duration_s=seconds,
                                     output=output[-OUTPUT_TAIL:], details=details)
    return rec


def _veto(rec: RewardRecord, reason: str, cap: float) -> None:
    """Cap the reward, fail the gate, set the flag (``rec`` changed in place)."""
    assert rec.reward is not None and rec.verdict is not None
    rec.reward = min(rec.reward, cap)
    if rec.measurements is not None:
        rec.measurements.reward_cap = cap
    rec.flags.judge_veto = True
    blocker = f"judge veto: {reason or 'no reason given'}"
    verdict = gate_verdict(rec.reward, rec.components, [blocker])
    rec.verdict = verdict.model_copy(update={"blockers": [blocker, *rec.verdict.blockers]})
