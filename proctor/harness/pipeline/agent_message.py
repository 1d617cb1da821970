"""The agent's own words, checked against what was measured: the step between the graded
suites and the reward.

A rollout may carry the agent's final ``message`` (a PR title and body, or its final answer)
and a ``transcript`` of what it did (:func:`proctor.rewards.message_checks.test_commands`
reads its shapes). :func:`check_agent_message` runs the deterministic checks of
:mod:`proctor.rewards.message_checks` on them against the graded suites and the patch, and
returns what the reward and the gate take: ``message_<check>`` penalty indicators (weighed
by ``[weights.message]``), the false claims as hard blockers of the gate, the
``false_claim`` flag and ``evidence["message"]``, where every finding names its rule and its
provenance (``deterministic``).

Bad input loses nothing: a message that is not UTF-8 or longer than
:data:`MAX_MESSAGE_BYTES`, or a transcript longer than :data:`MAX_TRANSCRIPT_BYTES`, not
JSON, or in a shape not read, leaves the checks that need it out with the reason in the
evidence; the patch is scored all the same. Without a message or transcript nothing
changes, and a measured patch's evidence says the checks did not apply.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from proctor.record import Evidence, SuiteTests
from proctor.rewards.message_checks import (
    Facts,
    TranscriptShapeError,
    check_message,
    patch_facts,
    test_commands,
)
from proctor.rewards.weights import MESSAGE_PENALTY_PREFIX

MAX_MESSAGE_BYTES = 64 * 1024
MAX_TRANSCRIPT_BYTES = 16 * 1024 * 1024
#: Evidence ``why`` when a rollout has neither.
NO_MESSAGE = "no message or transcript given"


@dataclass(frozen=True)
class AgentMessage:
    """What the agent said: its final ``message`` (text, or bytes as received) and its
    ``transcript`` (a parsed JSON value, or its JSON text or bytes); ``change``: the diff
    the message describes when it is more than the patch scored (``proctor gate`` scores a
    change without its tests, which became the hidden suite; None: the patch)."""

    message: str | bytes | None = None
    transcript: Any = None
    change: str | None = None


@dataclass
class MessageOutcome:
    """What the checks give the reward and the gate."""

    indicators: dict[str, float] = field(default_factory=dict)
    blockers: list[str] = field(default_factory=list)
    false_claim: bool = False
    evidence: Evidence | None = None


def not_applied(why: str) -> Evidence:
    """``evidence["message"]`` of a record the checks did not run on, saying why."""
    return Evidence(command="message_checks", details={"applied": False, "why": why})


def _message_text(message: str | bytes | None) -> tuple[str | None, str | None]:
    """(the message's text, None) or (None, why it cannot be checked)."""
    if message is None:
        return None, "no message given"
    data = message.encode("utf-8", "surrogatepass") if isinstance(message, str) else message
    if len(data) > MAX_MESSAGE_BYTES:
        return None, f"the message is {len(data)} bytes, over {MAX_MESSAGE_BYTES}"
    if isinstance(message, str):
        return message, None
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return None, f"the message is not UTF-8 (byte {exc.start})"


def _commands(transcript: Any) -> tuple[tuple | None, dict]:
    """(the transcript's test commands or None, its evidence details)."""
    if transcript is None:
        return None, {"read": False, "why": "no transcript given"}
    if isinstance(transcript, bytes | str):
        size = len(transcript.encode("utf-8", "surrogatepass")
                   if isinstance(transcript, str) else transcript)
        if size > MAX_TRANSCRIPT_BYTES:
            return None, {"read": False, "why": f"the transcript is {size} bytes, over "
                                                f"{MAX_TRANSCRIPT_BYTES}"}
        try:
            transcript = json.loads(transcript)
        except (ValueError, RecursionError) as exc:
            return None, {"read": False, "why": f"the transcript is not JSON: {exc}"[:200]}
    else:
        try:
            size = len(json.dumps(transcript, default=str))
        except (TypeError, ValueError, RecursionError) as exc:
            return None, {"read": False, "why": f"the transcript cannot be read: {exc}"[:200]}
        if size > MAX_TRANSCRIPT_BYTES:
            return None, {"read": False, "why": f"the transcript is {size} bytes of JSON, "
                                                f"over {MAX_TRANSCRIPT_BYTES}"}
    try:
        commands = test_commands(transcript)
    except TranscriptShapeError as exc:
        return None, {"read": False, "why": str(exc)}
    if commands is None:
        return None, {"read": True, "test_commands": None,
                      "why": "the transcript shows no command: what ran is unknown"}
    return commands, {"read": True, "test_commands": [
        {"command": c.command[:200], "passed": c.passed, "evidence": c.evidence[:200]}
        for c in commands]}


def facts(suites: dict[str, SuiteTests], patch_text: str, commands: tuple | None) -> Facts:
    """The :class:`~proctor.rewards.message_checks.Facts` of graded ``suites`` (failing:
    FAIL_TO_PASS and PASS_TO_PASS tests whose outcome is not ``passed``), the patch and the
    transcript's test commands."""
    failing = tuple(t for s in suites.values()
                    for group in (s.fail_to_pass, s.pass_to_pass)
                    for t, outcome in group.items() if outcome != "passed")
    return Facts(failing_tests=failing,
                 f2p_fixed=sum(s.f2p_passed for s in suites.values()),
                 f2p_total=sum(s.f2p_total for s in suites.values()),
                 test_commands=commands, **patch_facts(patch_text))


def check_agent_message(said: AgentMessage, suites: dict[str, SuiteTests],
                        patch_text: str) -> MessageOutcome:
    """Run the message checks on ``said`` against the graded ``suites`` and the patch
    (module docstring). Never raises for the input."""
    started = time.perf_counter()
    text, text_why = _message_text(said.message)
    commands, transcript = _commands(said.transcript)
    if text is None:
        details = {"applied": False, "why": text_why, "transcript": transcript}
        return MessageOutcome(evidence=Evidence(
            command="message_checks", duration_s=round(time.perf_counter() - started, 6),
            details=details))
    report = check_message(text, facts(suites, said.change or patch_text, commands))
    kinds = {f.rule.split(".", 1)[0] for f in report.findings}
    out = MessageOutcome(
        indicators={f"{MESSAGE_PENALTY_PREFIX}{k}": float(k in kinds)
                    for k in ("false_claim", "garbage", "fidelity")},
        blockers=[f"false claim: {f.rule}: {f.evidence}" for f in report.findings
                  if f.blocker],
        false_claim="false_claim" in kinds)
    out.evidence = Evidence(
        command="message_checks", duration_s=round(time.perf_counter() - started, 6),
        details={"applied": True, "message_chars": len(text),
                 "content_score": report.content, "content_reason": report.content_reason,
                 "findings": [{"rule": f.rule, "evidence": f.evidence, "blocker": f.blocker,
                               "provenance": "deterministic"} for f in report.findings],
                 "transcript": transcript})
    return out
