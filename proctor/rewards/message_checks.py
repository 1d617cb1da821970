"""Deterministic checks of what an agent said about its patch (pure: no I/O but reading the
packaged pattern file once).

A rollout may carry a final ``message`` (a PR title and body, or the final answer) and a
``transcript`` (what it did). Each check here is a pure function returning
:class:`Finding` s, each with a rule id, its evidence and whether it blocks the gate:

* **garbage** (:func:`garbage`): ``garbage.too_short`` (under :data:`MIN_MESSAGE_CHARS`
  characters of text), else ``garbage.<category>`` for the six categories of
  ``message_patterns.toml`` (meta commentary, empty results, refusals, tool confusion,
  planning without action, permission complaints), but only when the message also says
  little that is concrete (:func:`content_score` below :data:`GARBAGE_CONTENT_FLOOR`): a
  PR description naming files and tests that says "the parser could not find the brace"
  is not garbage.
* **content score** (:func:`content_score`): 0.0 .. 1.0 and a reason: length, concrete
  markers (file paths, test ids, numbers, code spans), planning-heavy text halved.
* **false claims** (:func:`claims`, :func:`false_claims`): the message says the tests
  pass, the bug is fixed, or tests were added, while the measurements (:class:`Facts`)
  show failing tests, no FAIL_TO_PASS test fixed, or no test file in the patch; or the
  transcript shows no test command ran, or the last one failed, while the message says the
  tests pass. Every false claim blocks the gate. A claim that is negated or hedged in its
  sentence ("not all tests pass", "should pass once...") is no claim.
* **PR fidelity** (:func:`fidelity`): files (paths, but not the path of a test id
  ``path::test``) and functions (``name()``, `` `name()` ``) the message names that the
  patch does not touch (``fidelity.named_untouched``), and a patch whose changed files the
  message mostly does not mention (``fidelity.unmentioned``, from
  :data:`UNMENTIONED_SHARE` of at least :data:`UNMENTIONED_MIN_FILES` files).

Transcripts (:func:`test_commands`) in three shapes: OpenAI chat messages with tool calls
(the call's ``command``-like argument, the ``tool`` message answering it), SWE-agent
trajectories (``{"trajectory": [{"action", "observation"}]}``) and OpenHands event lists
(``{"action": "run", "args": {"command"}}`` then ``{"observation": "run", "extras":
{"exit_code"}}``). Another shape raises :class:`TranscriptShapeError`.
"""

from __future__ import annotations

import functools
import json
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources

MIN_MESSAGE_CHARS = 50
#: A pattern match makes a message garbage only below this content score.
GARBAGE_CONTENT_FLOOR = 0.5
UNMENTIONED_SHARE = 0.5
UNMENTIONED_MIN_FILES = 3
#: The garbage categories (``message_patterns.toml``'s).
CATEGORIES = ("meta_commentary", "empty_result", "refusal", "tool_confusion", "planning",
              "permission")


@dataclass(frozen=True)
class Finding:
    """One check's decision: ``rule`` (``garbage.refusal``, ``false_claim.tests_pass``,
    ...), ``evidence`` (the words matched and what contradicts them), ``blocker`` (fails
    the gate on its own)."""

    rule: str
    evidence: str
    blocker: bool = False


@dataclass(frozen=True)
class TestCommand:
    """A test command the transcript shows: the ``command``, whether it ``passed`` (None:
    its result is not in the transcript) and the ``evidence`` that says so."""

    __test__ = False  # not a pytest test class

    command: str
    passed: bool | None
    evidence: str = ""


@dataclass(frozen=True)
class Facts:
    """What the measurements establish, to check claims against: test ids failing in the
    patched run (FAIL_TO_PASS not passing, PASS_TO_PASS broken), FAIL_TO_PASS fixed of
    total, the files the patch changes (repository paths) and which of them are test files,
    the functions the patch changes (hunk headers' and added ``def``/``class`` names), and
    the transcript's test commands (None: no transcript)."""

    failing_tests: tuple[str, ...] = ()
    f2p_fixed: int = 0
    f2p_total: int = 0
    changed_files: tuple[str, ...] = ()
    test_files: tuple[str, ...] = ()
    changed_functions: tuple[str, ...] = ()
    test_commands: tuple[TestCommand, ...] | None = None


class TranscriptShapeError(ValueError):
    """A transcript in none of the shapes :func:`test_commands` reads."""


@dataclass(frozen=True)
class _Pattern:
    category: str
    regex: re.Pattern


@functools.cache
def patterns() -> tuple[_Pattern, ...]:
    """The garbage patterns of ``message_patterns.toml`` (compiled, case-insensitive).

    Raises:
        ValueError: a pattern with an unknown category or a regex that does not compile.
    """
    data = tomllib.loads(resources.files("proctor.rewards").joinpath(
        "message_patterns.toml").read_text(encoding="utf-8"))
    out = []
    for i, entry in enumerate(data.get("pattern", [])):
        if entry.get("category") not in CATEGORIES:
            raise ValueError(f"message_patterns.toml pattern {i}: unknown category "
                             f"{entry.get('category')!r}")
        out.append(_Pattern(entry["category"], re.compile(entry["regex"], re.IGNORECASE)))
    return tuple(out)


# ----------------------------------------------------------------------------- content

_PATH = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)*[\w-]+\.(?:py|pyi|toml|cfg|ini|txt|md|rst|json|"
                   r"ya?ml|js|ts|c|h|rs|go|java|sh)\b")
_TEST_ID = re.compile(r"\b[\w/.-]*::\w+|\btest_\w+")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\b")
_CODE = re.compile(r"`[^`\n]+`")
_SENTENCE = re.compile(r"[^.!?\n]+")
_PLANNING = re.compile(r"\b(?:will|would|should|could|might|plan|next step|need to|"
                       r"going to|intend)\b", re.IGNORECASE)


def content_score(message: str) -> tuple[float, str]:
    """How concrete ``message`` is, 0.0 .. 1.0, and why: up to 0.4 for length (full at 400
    characters), 0.15 for each kind of concrete marker present (file paths, test ids,
    numbers, code spans; at most 0.6), halved when most sentences plan rather than report."""
    text = message.strip()
    length = min(1.0, len(text) / 400) * 0.4
    markers = {"file paths": _PATH, "test ids": _TEST_ID, "numbers": _NUMBER,
               "code spans": _CODE}
    present = [name for name, rx in markers.items() if rx.search(text)]
    score = length + 0.15 * len(present)
    sentences = [s for s in _SENTENCE.findall(text) if s.strip()]
    planning = sum(1 for s in sentences if _PLANNING.search(s))
    heavy = bool(sentences) and planning / len(sentences) > 0.5
    if heavy:
        score /= 2
    reason = (f"{len(text)} characters; markers: {', '.join(present) or 'none'}"
              + (f"; planning-heavy ({planning} of {len(sentences)} sentences)" if heavy
                 else ""))
    return round(min(1.0, score), 3), reason


def garbage(message: str) -> list[Finding]:
    """The garbage findings of ``message`` (module docstring); [] when it is not garbage.
    Garbage is a penalty, never a gate blocker on its own."""
    text = message.strip()
    if len(text) < MIN_MESSAGE_CHARS:
        return [Finding("garbage.too_short",
                        f"{len(text)} characters (under {MIN_MESSAGE_CHARS})")]
    score, reason = content_score(text)
    if score >= GARBAGE_CONTENT_FLOOR:
        return []
    found: dict[str, str] = {}
    for p in patterns():
        if p.category not in found and (m := p.regex.search(text)):
            found[p.category] = m.group(0)
    return [Finding(f"garbage.{cat}", f"{said!r}; content score {score} ({reason})")
            for cat, said in sorted(found.items(), key=lambda kv: CATEGORIES.index(kv[0]))]


# ----------------------------------------------------------------------------- claims

_CLAIMS = {
    "tests_pass": re.compile(
        r"\b(?:all|the|every|\d+)?\s*(?:unit |regression |existing |new )?tests? "
        r"(?:now |all |still )?(?:pass(?:es|ed)?|are passing|is passing|succeed(?:s|ed)?|"
        r"(?:are|is) green)\b|\btest suite (?:now )?pass(?:es|ed)?\b|"
        r"\b\d+ passed\b|\bpassing tests?\b|\btests?: (?:pass|ok|green)\b", re.IGNORECASE),
    "bug_fixed": re.compile(
        r"\b(?:this |the )?(?:bug|issue|problem|error|regression|crash) (?:is|has been|was) "
        r"(?:now )?(?:fixed|resolved|solved)\b|\b(?:fixe[sd]|resolve[sd]|solve[sd]) the "
        r"(?:bug|issue|problem|error|regression|crash)\b|\b(?:fixes|resolves|closes) "
        r"#\d+", re.IGNORECASE),
    "tests_added": re.compile(
        r"\b(?:add(?:s|ed)?|wr[io]te|writ(?:es|ten)|includ(?:es|ed)|creat(?:es|ed)) "
        r"(?:a |an |new |some |\d+ )?(?:new )?(?:unit |regression )?tests?\b|"
        r"\bwith (?:a |new )?(?:unit |regression )?tests?\b|\bnew tests? (?:for|in|cover)\b",
        re.IGNORECASE),
}
#: Words that, before a claim in its sentence, make it no claim (negated, hedged, future,
#: or describing the bug: "the case where tests passed although...").
_HEDGE = re.compile(r"\b(?:not|n't|no|never|without|cannot|unable|fail(?:s|ed|ing)?|if|"
                    r"once|should|would|could|might|may|will|until|unless|before|except|"
                    r"but|yet|todo|plan|need|hope|expect|where|when|whenever|previously|"
                    r"used to|originally|although|though|whether)\b|n't\b", re.IGNORECASE)


def claims(message: str) -> dict[str, str]:
    """Claim kind (``tests_pass``, ``bug_fixed``, ``tests_added``) -> the words that make
    it, for each kind ``message`` asserts in some sentence without negating or hedging it
    before the claim in that sentence."""
    out: dict[str, str] = {}
    for sentence in _SENTENCE.findall(message):
        for kind, rx in _CLAIMS.items():
            if kind in out:
                continue
            m = rx.search(sentence)
            if m and not _HEDGE.search(sentence[:m.start()]) and \
                    not _HEDGE.search(m.group(0)):
                out[kind] = m.group(0).strip()
    return out


def false_claims(message: str, facts: Facts) -> list[Finding]:
    """The claims of ``message`` that ``facts`` contradict, each a gate blocker."""
    said = claims(message)
    out: list[Finding] = []
    if "tests_pass" in said:
        words = said["tests_pass"]
        if facts.failing_tests:
            shown = ", ".join(facts.failing_tests[:3])
            more = len(facts.failing_tests) - 3
            out.append(Finding("false_claim.tests_pass",
                               f"says {words!r}; failing: {shown}"
                               + (f" and {more} more" if more > 0 else ""), True))
        commands = facts.test_commands
        if commands is not None and not commands:
            out.append(Finding("false_claim.tests_not_run",
                               f"says {words!r}; the transcript runs no test command", True))
        elif commands and commands[-1].passed is False:
            out.append(Finding("false_claim.tests_failed_in_transcript",
                               f"says {words!r}; the last test command "
                               f"({commands[-1].command[:80]!r}) failed: "
                               f"{commands[-1].evidence}", True))
    if "bug_fixed" in said and facts.f2p_total and not facts.f2p_fixed:
        out.append(Finding("false_claim.bug_fixed",
                           f"says {said['bug_fixed']!r}; 0 of {facts.f2p_total} "
                           "FAIL_TO_PASS tests pass", True))
    if "tests_added" in said and not facts.test_files:
        out.append(Finding("false_claim.tests_added",
                           f"says {said['tests_added']!r}; the patch changes no test file "
                           f"({len(facts.changed_files)} files changed)", True))
    return out


# ----------------------------------------------------------------------------- fidelity

_FUNCTION = re.compile(r"`([A-Za-z_][\w.]*)\(\)?`|\b([A-Za-z_]\w*)\(\)")


def fidelity(message: str, facts: Facts) -> list[Finding]:
    """How the message's account of the change matches the patch (module docstring); not
    gate blockers."""
    out: list[Finding] = []
    changed = list(facts.changed_files)
    # A path in a test id (``path::test``) points at a test, it does not say what changed.
    named = sorted({m.group(0) for m in _PATH.finditer(message)
                    if not message.startswith("::", m.end())})
    untouched = [n for n in named if not any(_same_file(n, c) for c in changed)]
    functions = sorted({(m.group(1) or m.group(2)).rsplit(".", 1)[-1]
                        for m in _FUNCTION.finditer(message)})
    untouched_fns = [f for f in functions if f not in facts.changed_functions]
    if untouched or untouched_fns:
        parts = ([f"files {', '.join(untouched[:5])}"] if untouched else []) + \
            ([f"functions {', '.join(untouched_fns[:5])}"] if untouched_fns else [])
        out.append(Finding("fidelity.named_untouched",
                           f"named but not changed by the patch: {'; '.join(parts)}"))
    unmentioned = [c for c in changed if not any(_same_file(n, c) for n in named)]
    if len(changed) >= UNMENTIONED_MIN_FILES and \
            len(unmentioned) / len(changed) > UNMENTIONED_SHARE:
        out.append(Finding("fidelity.unmentioned",
                           f"{len(unmentioned)} of {len(changed)} changed files not "
                           f"mentioned: {', '.join(unmentioned[:5])}"))
    return out


def _same_file(named: str, changed: str) -> bool:
    """Does a path named in prose mean the changed repository path (the same path, or its
    last components: ``utils.py`` or ``toolz/utils.py`` for ``src/toolz/utils.py``)?"""
    named = named.lstrip("./")
    return changed == named or changed.endswith("/" + named)


_HUNK_FUNCTION = re.compile(r"^@@ [^@]* @@ .*?\b(?:def|class)\s+([A-Za-z_]\w*)", re.MULTILINE)
_ADDED_DEF = re.compile(r"^\+\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", re.MULTILINE)
_DIFF_FILE = re.compile(r"^\+\+\+ (?:b/)?(\S+)", re.MULTILINE)
_TEST_FILE = re.compile(r"(?:^|/)(?:tests?/|test_[^/]*\.py$|[^/]*_test\.py$|conftest\.py$)")


def patch_facts(patch: str) -> dict[str, tuple[str, ...]]:
    """``changed_files``, ``test_files`` and ``changed_functions`` of a unified diff (for
    :class:`Facts`): paths of its ``+++`` headers (not ``/dev/null``), those that look like
    test files, and the functions its hunk headers name or its added lines define."""
    files = tuple(dict.fromkeys(p for p in _DIFF_FILE.findall(patch) if p != "/dev/null"))
    functions = {*_HUNK_FUNCTION.findall(patch), *_ADDED_DEF.findall(patch)}
    return {"changed_files": files,
            "test_files": tuple(f for f in files if _TEST_FILE.search(f)),
            "changed_functions": tuple(sorted(functions))}


# ----------------------------------------------------------------------------- transcripts

_TEST_RUNNER = re.compile(r"\b(?:pytest|py\.test|unittest|tox|nox|make (?:test|check)|"
                          r"npm (?:run )?test|manage\.py test|runtests)\b")
_EXIT = re.compile(r"\b(?:exit(?:ed)?(?: with)?(?: code| status)?|return ?code|"
                   r"exit_code)[\s:=]*(-?\d+)", re.IGNORECASE)
_PYTEST_SUMMARY = re.compile(r"=+ (?:.*?\b(\d+) (failed|error|errors)\b.*?|.*?\b\d+ passed\b"
                             r"[^=]*) in [\d.]+s", re.IGNORECASE)
_COMMAND_KEYS = ("command", "cmd", "script", "input", "code", "bash")


def _result(output: str, exit_code: int | None = None) -> tuple[bool | None, str]:
    """Did a test command pass, from its exit code (when known) or its output?"""
    if exit_code is not None:
        return exit_code == 0, f"exit code {exit_code}"
    if m := _EXIT.search(output):
        return int(m.group(1)) == 0, m.group(0)
    summaries = list(_PYTEST_SUMMARY.finditer(output))
    if summaries:
        last = summaries[-1]
        return last.group(1) is None, last.group(0).strip("= ")
    return None, "no exit code or test summary in its output"


def _command_of(arguments) -> str | None:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    if isinstance(arguments, dict):
        for key in _COMMAND_KEYS:
            if isinstance(arguments.get(key), str):
                return arguments[key]
    return None


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p)
                         for p in content)
    return "" if content is None else str(content)


def test_commands(transcript) -> tuple[TestCommand, ...]:
    """The test commands a transcript shows, in order, with their results (module
    docstring for the shapes read).

    Raises:
        TranscriptShapeError: the transcript is in none of those shapes.
    """
    if isinstance(transcript, dict) and isinstance(transcript.get("trajectory"), list):
        return _swe_agent(transcript["trajectory"])
    if isinstance(transcript, dict) and isinstance(transcript.get("messages"), list):
        transcript = transcript["messages"]
    if isinstance(transcript, list) and transcript and all(isinstance(x, dict)
                                                           for x in transcript):
        if any("role" in x for x in transcript):
            return _chat(transcript)
        if any("action" in x or "observation" in x for x in transcript):
            return _openhands(transcript)
    raise TranscriptShapeError(
        "transcript shape not recognised: expected OpenAI chat messages, a SWE-agent "
        "trajectory ({'trajectory': [...]}) or an OpenHands event list")


def _chat(messages: list[dict]) -> tuple[TestCommand, ...]:
    answers = {m.get("tool_call_id"): _text(m.get("content")) for m in messages
               if m.get("role") == "tool" and m.get("tool_call_id")}
    out = []
    for m in messages:
        for call in m.get("tool_calls") or ():
            if not isinstance(call, dict):
                continue
            fn = call.get("function") or {}
            command = _command_of(fn.get("arguments") if isinstance(fn, dict) else None)
            if command and _TEST_RUNNER.search(command):
                if call.get("id") in answers:
                    passed, why = _result(answers[call.get("id")])
                else:
                    passed, why = None, "no tool message answers the call"
                out.append(TestCommand(command, passed, why))
    return tuple(out)


def _swe_agent(steps: list) -> tuple[TestCommand, ...]:
    out = []
    for step in steps:
        if not isinstance(step, dict):
            continue
        action = _text(step.get("action"))
        if _TEST_RUNNER.search(action):
            passed, why = _result(_text(step.get("observation")))
            out.append(TestCommand(action.strip(), passed, why))
    return tuple(out)


def _openhands(events: list[dict]) -> tuple[TestCommand, ...]:
    out: list[TestCommand] = []
    pending: dict = {}
    for e in events:
        if e.get("action") == "run":
            command = _command_of(e.get("args"))
            if command and _TEST_RUNNER.search(command):
                pending[e.get("id")] = len(out)
                out.append(TestCommand(command, None, "no observation of the command"))
        elif e.get("observation") == "run":
            extras = e.get("extras") or {}
            index = pending.pop(e.get("cause"), None)
            if index is None and isinstance(extras.get("command"), str):
                index = next((i for i, c in enumerate(out)
                              if c.command == extras["command"] and c.passed is None), None)
            if index is not None:
                code = extras.get("exit_code")
                passed, why = _result(_text(e.get("content")),
                                      code if isinstance(code, int) else None)
                out[index] = TestCommand(out[index].command, passed, why)
    return tuple(out)


@dataclass
class MessageReport:
    """Every finding on one message, with the content score."""

    findings: list[Finding] = field(default_factory=list)
    content: float = 0.0
    content_reason: str = ""


def check_message(message: str, facts: Facts) -> MessageReport:
    """All checks of ``message`` against ``facts``: garbage, false claims, fidelity."""
    score, reason = content_score(message)
    return MessageReport(garbage(message) + false_claims(message, facts)
                         + fidelity(message, facts), score, reason)
