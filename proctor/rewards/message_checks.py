"""Deterministic checks of what an agent said about its patch (pure: no I/O but reading the
packaged pattern file once).

A rollout may carry a final ``message`` (a PR title and body, or the final answer) and a
``transcript`` (what it did). Each check here is a pure function returning
:class:`Finding` s, each with a rule id, its evidence and whether it blocks the gate:

* **garbage** (:func:`garbage`): ``garbage.too_short`` (under :data:`MIN_MESSAGE_CHARS`
  characters of text), else ``garbage.<category>`` for the six categories of
  ``message_patterns.toml`` (meta commentary, empty results, refusals, tool confusion,
  planning without action, permission complaints), but only when the message also says
  little that is concrete (:func:`content_score` below :data:`GARBAGE_CONTENT_FLOOR`, and
  no file path, test id or code span): a message that names `getter` and says "I couldn't
  find other callers" is not garbage.
* **content score** (:func:`content_score`): 0.0 .. 1.0 and a reason: length, concrete
  markers (file paths, test ids, numbers, code spans), planning-heavy text halved.
* **false claims** (:func:`claims`, :func:`false_claims`): the message says the tests
  pass (or names a test that passes), the bug is fixed, or tests were added, while the
  measurements (:class:`Facts`) show failing tests (that test failing), no FAIL_TO_PASS
  test fixed, or no test file in the patch; or the transcript's commands run no tests, or
  the last test command with a result failed, while the message says the tests pass.
  Every false claim blocks the gate, so a claim is read narrowly: sentence by sentence
  (``conftest.py`` ends none) and clause by clause (split at ``, ; :`` and ``and``,
  ``but``...); nothing before it in its clause may negate, hedge or move it to another
  state ("not", "should", "if", "when", "on main", "previously"), its sentence may not
  qualify it ("except", "partial", "pre-existing", "still fails", "1 failed"), an
  unchecked box ``- [ ]`` claims nothing, and "added a test script to reproduce" is no
  test added.
* **PR fidelity** (:func:`fidelity`): files (paths, but not the path of a test id
  ``path::test``) and functions (``name()``, `` `name()` ``) the message names that the
  patch does not touch (``fidelity.named_untouched``), and a patch whose changed files the
  message mostly does not mention (``fidelity.unmentioned``, from
  :data:`UNMENTIONED_SHARE` of at least :data:`UNMENTIONED_MIN_FILES` files).

Transcripts (:func:`test_commands`): chat messages (OpenAI tool calls and legacy
``function_call`` answered by ``tool`` / ``function`` messages; Anthropic ``tool_use``
blocks answered by ``tool_result`` blocks; the call's ``command``-like argument),
SWE-agent trajectories (``{"trajectory": [{"action", "observation"}]}``) and OpenHands
event lists (``{"action": "run", "args": {"command"}}`` then ``{"observation": "run",
"extras": {"exit_code"}}``, also ``run_ipython`` and ``extras.metadata.exit_code``). A
command is a test command when a segment of it starts with a test runner
(:func:`is_test_command`); its result is the runner's own summary (pytest's counts,
unittest's ``OK`` / ``FAILED``), else its exit code (not a pipeline's). A transcript with
no command at all says nothing about what ran (None); another shape raises
:class:`TranscriptShapeError`.
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

#: Repetitions are bounded here and below: every check is linear in the message (a 64 KiB
#: message of any shape takes well under a second).
_PATH = re.compile(r"(?<![\w/.-])(?:[\w.-]{1,100}/){0,20}[\w-]{1,100}\.(?:py|pyi|toml|cfg|"
                   r"ini|txt|md|rst|json|ya?ml|js|ts|c|h|rs|go|java|sh)\b")
_TEST_ID = re.compile(r"\b[\w/.-]{0,200}::\w|\btest_\w")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\b")
_CODE = re.compile(r"`[^`\n]+`")
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
    sentences = [s for s in _SENTENCES.split(text) if s.strip()]
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
    if score >= GARBAGE_CONTENT_FLOOR or any(rx.search(text) for rx in (_PATH, _TEST_ID, _CODE)):
        return []
    found: dict[str, str] = {}
    for p in patterns():
        if p.category not in found and (m := p.regex.search(text)):
            found[p.category] = m.group(0)
    return [Finding(f"garbage.{cat}", f"{said!r}; content score {score} ({reason})")
            for cat, said in sorted(found.items(), key=lambda kv: CATEGORIES.index(kv[0]))]


# ----------------------------------------------------------------------------- claims

#: Sentences end at ``.``, ``!`` or ``?`` followed by a space or the end (not inside
#: ``conftest.py``), and at line breaks.
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
#: Clauses: the parts of a sentence between ``, ; :``, ``and``, ``but``, ``so``, ``while``.
#: (A colon after a label, ``Tests: passing``, is not a clause's end.)
_CLAUSES = re.compile(r"[,;]\s+|(?<!tests)(?<!test)(?<!suite)(?<!pytest)(?<!ci):\s+"
                      r"|\s+(?:and|but|so|while|whereas|then)\s+|\s+[-–—]\s+",
                      re.IGNORECASE)
_UNCHECKED = re.compile(r"^\s*(?:[-*+]|\d+\.)\s*\[ \]")
#: Markdown around the words: heading and quote marks, list marks and checked boxes at the
#: start of a line; emphasis, code and table marks anywhere.
_LIST_MARK = re.compile(r"^\s*(?:[#>]+\s*)*(?:(?:[-*+]|\d+\.)\s+)?(?:\[[xX]\]\s*)?|[*`|]+")

_TESTS = r"(?:unit |regression |remaining |other |relevant |related ){0,3}tests"
_CLAIMS = {
    "tests_pass": re.compile(
        r"\b(?:(?:all|every|the|these|existing|new|old|and|\d+) ){0,6}" + _TESTS +
        r"(?: (?:now|all|still|are|were|have|did|also)){0,4} (?:pass(?:es|ed|ing)?|succeed(?:s|ed)?"
        r"|green|ok|clean)\b"
        r"|\btests?\s*[:=]\s*(?:pass(?:ing|ed)?|ok|green|✅)"
        r"|\b(?:test suite|suite|all checks|checks|ci)(?: (?:now|still|is|are)){0,3} "
        r"(?:pass(?:es|ed|ing)?|green|succeeds)\b"
        r"|\b(?:ran|run) the (?:whole |full |entire )?(?:test(?:s| suite)?|suite)"
        r"(?: \w+){0,6} (?:successfully|cleanly|without (?:any )?failures?)"
        r"|\beverything pass(?:es|ed)\b|\b0 failed\b|\bno (?:test )?failures\b"
        r"|\b\d+ passed\b|\bpytest\b[^.\n]{0,40}✅|✅\s*(?:all )?tests?",
        re.IGNORECASE),
    "bug_fixed": re.compile(
        r"\b(?:bug|issue|problem|error|regression|crash|exception|\w+(?:Error|Exception))"
        r"(?: (?:is|has|was|been|now|fully|successfully|completely)){0,4} "
        r"(?:fixed|resolved|solved|addressed)\b"
        r"|\b(?:fix(?:es|ed)?|resolve[sd]?|solve[sd]?|close[sd]?)(?: \w+ly)? "
        r"(?:the|this|that|an?) (?:\w+ )?(?:bug|issue|problem|error|regression|crash|"
        r"\w+(?:Error|Exception))\b"
        r"|\b(?:fix(?:es|ed)?|resolve[sd]?|close[sd]?)(?: (?:issue|bug))? #\d+"
        r"|\b(?:the )?(?:fix|change) (?:has been|is|was) (?:verified|confirmed|tested)\b"
        r"|\b(?:have|has) (?:successfully )?(?:fixed|resolved) (?:the|this)\b"
        r"|\bbug fixed\b",
        re.IGNORECASE),
    "tests_added": re.compile(
        r"\b(?:add(?:s|ed)?|wr[io]te|written|includ(?:es|ed)|creat(?:es|ed)|introduc(?:es|ed)"
        r"|extend(?:s|ed))(?: (?:a|an|two|three|four|five|\d+|some|several|more|comprehensive"
        r"|extra|additional|unit|regression|parametri[sz]ed|new|dedicated|focused)){0,4} "
        r"(?:tests?|test cases?|test coverage|test_\w+)\b"
        r"|\btests? (?:were |have been |has been )?added\b"
        r"|\bnew tests? (?:for|in|cover)",
        re.IGNORECASE),
}
#: In a claim's clause, before the claim: it is negated, hedged, future, or describes
#: another state ("on main all tests pass", "if ... the tests pass").
_HEDGE = re.compile(
    r"\b(?:not|no|never|without|cannot|unable|if|once|should|would|could|might|may|will"
    r"|until|unless|before|when|where|whenever|previously|used to|originally|although"
    r"|though|whether|expect(?:ed)?|hope|plan|need|todo|main|master|upstream|try|tried"
    r"|attempt(?:ed)?|supposed)\b|n't\b", re.IGNORECASE)
#: Anywhere in a claim's sentence: it is qualified (a partial result, an exception named).
_QUALIFIED = re.compile(
    r"\b(?:except|apart from|other than|besides|aside from|partial(?:ly)?|pre-?existing"
    r"|(?:still|also|already) fail(?:s|ed|ing)?|not (?:yet )?(?:fixed|resolved)"
    r"|[1-9]\d* (?:failed|errors?|failures?))\b", re.IGNORECASE)
#: A ``tests_added`` claim about a throwaway script, not a test in the patch.
_THROWAWAY = re.compile(r"\b(?:script|reproduc\w*|scratch|temporar\w*|not committed|locally"
                        r"|removed|deleted)\b", re.IGNORECASE)
_NAMED_PASS = re.compile(r"((?:[\w/.-]{1,200}::)?(?:\w{1,100}::){0,3}(test_\w+)"
                         r"(?:\[[^\]\s]{0,200}\])?)"
                         r"(?:\s+(?:now|also|still|too))*[\s:✅✔️]+"
                         r"(?:pass(?:es|ed)?|is passing|succeeds)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Claim:
    """A claim the message makes: its ``kind`` (``tests_pass``, ``bug_fixed``,
    ``tests_added``, ``test_passes``), the ``words`` that make it and, for
    ``test_passes``, the ``test`` named."""

    kind: str
    words: str
    test: str | None = None


def _clean(line: str) -> str:
    """A line without list marks, checked boxes and markdown emphasis."""
    return _LIST_MARK.sub(" ", line).strip()


def claims(message: str) -> list[Claim]:
    """The claims ``message`` makes, first of each kind (and each named test) in order. A
    claim counts only when nothing in its clause before it negates or hedges it
    (:data:`_HEDGE`) and its sentence does not qualify it (:data:`_QUALIFIED`); an unchecked
    box (``- [ ] all tests pass``) claims nothing."""
    out: list[Claim] = []
    seen: set[tuple[str, str | None]] = set()
    for line in message.splitlines():
        if _UNCHECKED.match(line):
            continue
        for sentence in _SENTENCES.split(_clean(line)):
            qualified = bool(_QUALIFIED.search(sentence))
            for clause in _CLAUSES.split(sentence):
                for claim in _clause_claims(clause, sentence, qualified):
                    if (claim.kind, claim.test) not in seen:
                        seen.add((claim.kind, claim.test))
                        out.append(claim)
    return out


def _clause_claims(clause: str, sentence: str, qualified: bool) -> list[Claim]:
    found = []
    for kind, rx in _CLAIMS.items():
        m = rx.search(clause)
        if m is None or _HEDGE.search(clause[:m.start()]) or _HEDGE.search(m.group(0)):
            continue
        if qualified and kind != "tests_added":
            continue
        if kind == "tests_added" and _THROWAWAY.search(sentence):
            continue
        found.append(Claim(kind, m.group(0).strip()))
    for m in _NAMED_PASS.finditer(clause):
        if not _HEDGE.search(clause[:m.start()]):
            found.append(Claim("test_passes", m.group(0).strip(), m.group(1)))
    return found


def _is_test(named: str, test_id: str) -> bool:
    """Does a test named in prose (``test_get``, ``path::test_get``, ``Class::test_get``,
    with or without parameters) mean the test id?"""
    for candidate in (test_id, test_id.split("[", 1)[0]):
        if candidate == named or candidate.endswith(("::" + named, "/" + named)):
            return True
    return False


def false_claims(message: str, facts: Facts) -> list[Finding]:
    """The claims of ``message`` that ``facts`` contradict, each a gate blocker."""
    said = claims(message)
    kinds = {c.kind: c.words for c in reversed(said)}
    out: list[Finding] = []
    if "tests_pass" in kinds:
        words = kinds["tests_pass"]
        if facts.failing_tests:
            shown = ", ".join(facts.failing_tests[:3])
            more = len(facts.failing_tests) - 3
            out.append(Finding("false_claim.tests_pass",
                               f"says {words!r}; failing: {shown}"
                               + (f" and {more} more" if more > 0 else ""), True))
        commands = facts.test_commands
        known = [c for c in commands or () if c.passed is not None]
        if commands is not None and not commands:
            out.append(Finding("false_claim.tests_not_run",
                               f"says {words!r}; the transcript's commands run no tests",
                               True))
        elif known and known[-1].passed is False:
            out.append(Finding("false_claim.tests_failed_in_transcript",
                               f"says {words!r}; the last test command with a result "
                               f"({known[-1].command[:80]!r}) failed: {known[-1].evidence}",
                               True))
    if "tests_pass" not in kinds or not facts.failing_tests:
        for claim in said:
            failing = [t for t in facts.failing_tests
                       if claim.kind == "test_passes" and _is_test(claim.test or "", t)]
            if failing:
                out.append(Finding("false_claim.tests_pass",
                                   f"says {claim.words!r}; failing: {failing[0]}", True))
                break
    if "bug_fixed" in kinds and facts.f2p_total and not facts.f2p_fixed:
        out.append(Finding("false_claim.bug_fixed",
                           f"says {kinds['bug_fixed']!r}; 0 of {facts.f2p_total} "
                           "FAIL_TO_PASS tests pass", True))
    if "tests_added" in kinds and not facts.test_files:
        out.append(Finding("false_claim.tests_added",
                           f"says {kinds['tests_added']!r}; the patch changes no test file "
                           f"({len(facts.changed_files)} files changed)", True))
    return out


# ----------------------------------------------------------------------------- fidelity

_FUNCTION = re.compile(r"\b([A-Za-z_][\w.]*)\(\)")
_CHANGE_VERB = re.compile(r"\b(?:fix\w*|chang\w*|modif\w*|updat\w*|rewr\w*|refactor\w*"
                          r"|add\w*|remov\w*|renam\w*|replac\w*|edit\w*|adjust\w*|touch\w*"
                          r"|rework\w*|moved?|delet\w*)\b", re.IGNORECASE)
_TEST_PATH = re.compile(r"(?:^|/)(?:tests?/|test_[^/]*\.py$|[^/]*_test\.py$|conftest\.py$)")


def fidelity(message: str, facts: Facts) -> list[Finding]:
    """How the message's account of the change matches the patch (module docstring); not
    gate blockers. What the message says it changed is what it names in a clause with a
    change verb (fixed, changed, updated, added, ...): files (not test files, which a
    message names for the tests it ran; not the path of a test id ``path::test``) and
    functions (``name()``; a bare name may be a variable or a key)."""
    out: list[Finding] = []
    changed = list(facts.changed_files)
    named: set[str] = set()
    functions: set[str] = set()
    all_named: set[str] = set()
    for sentence in _SENTENCES.split(message):
        for clause in _CLAUSES.split(sentence):
            paths = {m.group(0) for m in _PATH.finditer(clause)
                     if not clause.startswith("::", m.end())}
            all_named |= paths
            if not _CHANGE_VERB.search(clause):
                continue
            named |= {p for p in paths if not _TEST_PATH.search(p)}
            functions |= {m.group(1).rsplit(".", 1)[-1] for m in _FUNCTION.finditer(clause)}
    untouched = sorted(n for n in named if not any(_same_file(n, c) for c in changed))
    stems = {n.rsplit("/", 1)[-1].split(".")[0] for n in all_named}
    untouched_fns = sorted(f for f in functions
                           if f not in facts.changed_functions and f not in stems)
    if untouched or untouched_fns:
        parts = ([f"files {', '.join(untouched[:5])}"] if untouched else []) + \
            ([f"functions {', '.join(untouched_fns[:5])}"] if untouched_fns else [])
        out.append(Finding("fidelity.named_untouched",
                           f"said to be changed but not changed by the patch: "
                           f"{'; '.join(parts)}"))
    unmentioned = [c for c in changed if not any(_same_file(n, c) for n in all_named)]
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


def patch_facts(patch: str) -> dict[str, tuple[str, ...]]:
    """``changed_files``, ``test_files`` and ``changed_functions`` of a unified diff (for
    :class:`Facts`): paths of its ``+++`` headers (not ``/dev/null``), those that look like
    test files, and the functions its hunk headers name or its added lines define."""
    files = tuple(dict.fromkeys(p for p in _DIFF_FILE.findall(patch) if p != "/dev/null"))
    functions = {*_HUNK_FUNCTION.findall(patch), *_ADDED_DEF.findall(patch)}
    return {"changed_files": files,
            "test_files": tuple(f for f in files if _TEST_PATH.search(f)),
            "changed_functions": tuple(sorted(functions))}


# ----------------------------------------------------------------------------- transcripts

#: A test runner at the start of a command segment (after ``cd``, env assignments,
#: ``timeout N``, ``python -m``).
_TEST_RUNNER = re.compile(
    r"^(?:(?:sudo|env|time|timeout\s+\S+|\w+=\S*)\s+)*(?:(?:python\d?(?:\.\d+)?|uv run|poetry run"
    r"|pipenv run|hatch run)\s+(?:-\w+\s+)*)?(?:-m\s+)?(?:pytest|py\.test|unittest|tox|nox"
    r"|(?:\./)?bin/test|(?:\./)?(?:tests/)?runtests(?:\.py)?|manage\.py\s+test|(?:\S*/)?pytest"
    r"|go\s+test|cargo\s+test|npm\s+(?:run\s+)?test|yarn\s+test|make\s+(?:test|check)"
    r"|ctest|mvn\s+test|gradle\w*\s+test)\b")
_SEGMENTS = re.compile(r"&&|\|\||;|\n")
#: Commands that run the tests on another tree than the final one (``git stash``: without
#: the change, on purpose).
_OTHER_TREE = re.compile(r"\bgit\s+(?:stash|checkout|switch|worktree)\b")
_PYTEST_LINE = re.compile(r"^[= ]*(?:(\d+) (?:failed|errors?)|\d+ (?:passed|skipped|xfailed|"
                          r"xpassed|deselected|warnings?))\b[^\n]*\bin [\d.]+\s*s",
                          re.MULTILINE | re.IGNORECASE)
#: sympy's ``bin/test``: ``= tests finished: 41 passed, 1 failed, in 2.1 seconds =``.
_SYMPY_LINE = re.compile(r"^=* ?tests finished: [^\n]*", re.MULTILINE)
_COUNTS = re.compile(r"\b(\d+) (failed|errors?|passed)\b", re.IGNORECASE)
_UNITTEST = re.compile(r"^Ran (\d+) tests? in [\d.]+s\s*\n\s*(OK|FAILED)\b", re.MULTILINE)
_NO_TESTS = re.compile(r"\bno tests ran\b", re.IGNORECASE)
_EXIT_LINE = re.compile(r"^\W*(?:command finished with )?(?:exit(?:ed)?(?: with)?"
                        r"(?: code| status)?|return ?code|exit_code)[\s:=]*(-?\d+)\W*$",
                        re.IGNORECASE | re.MULTILINE)
_COMMAND_KEYS = ("command", "cmd", "script", "input", "code", "bash")


def is_test_command(command: str) -> bool:
    """Does ``command`` (a shell command line) run a test runner in one of its segments
    (``cd x && python -m pytest -q``: yes; ``pip install pytest``, ``grep pytest``: no)?"""
    for segment in _SEGMENTS.split(command):
        words = segment.strip().lstrip("!").strip()
        for part in words.split("|")[:1]:
            if _TEST_RUNNER.match(part.strip()):
                return True
    return False


def _result(command: str, output: str, exit_code: int | None = None
            ) -> tuple[bool | None, str]:
    """Did a test command pass: from the runner's own summary in its output (pytest's
    counts line, unittest's ``Ran N tests`` then ``OK`` / ``FAILED``, "no tests ran": not
    passed), else from its exit code when the command is not a pipeline (a pipe's exit code
    is its last command's)."""
    lines = list(_PYTEST_LINE.finditer(output)) or list(_SYMPY_LINE.finditer(output))
    if lines:
        last = lines[-1]
        failed = any(int(n) > 0 for n, kind in _COUNTS.findall(last.group(0))
                     if kind.lower() != "passed")
        return not failed, last.group(0).strip("= \n")
    if m := list(_UNITTEST.finditer(output)):
        return m[-1].group(2) == "OK", " ".join(m[-1].group(0).split())
    if _NO_TESTS.search(output):
        return False, "no tests ran"
    if "|" not in command:
        if exit_code is not None:
            return exit_code == 0, f"exit code {exit_code}"
        if m := list(_EXIT_LINE.finditer(output)):
            return int(m[-1].group(1)) == 0, m[-1].group(0).strip()
    return None, "no test summary or exit code of the runner in its output"


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
        return "\n".join(_text(p.get("text", p.get("content", ""))) if isinstance(p, dict)
                         else str(p) for p in content)
    return "" if content is None else str(content)


def test_commands(transcript) -> tuple[TestCommand, ...] | None:
    """The test commands a transcript shows, in order, with their results (module
    docstring for the shapes read); None when it shows no command at all (then nothing can
    be said about what ran).

    Raises:
        TranscriptShapeError: the transcript is in none of those shapes.
    """
    if isinstance(transcript, dict):
        for key in ("trajectory", "history", "messages", "events"):
            if isinstance(transcript.get(key), list):
                if key == "trajectory":
                    return _done(_swe_agent(transcript[key]))
                transcript = transcript[key]
                break
    if isinstance(transcript, list) and transcript and all(isinstance(x, dict)
                                                           for x in transcript):
        readers = ([_chat] if any("role" in x for x in transcript) else []) + \
            ([_openhands, _swe_agent] if any("action" in x or "observation" in x
                                             for x in transcript) else [])
        if readers:
            reads = [reader(transcript) for reader in readers]
            return _done(next((r for r in reads if r[1]), reads[0]))
    raise TranscriptShapeError(
        "transcript shape not recognised: expected OpenAI or Anthropic chat messages, a "
        "SWE-agent trajectory ({'trajectory': [...]}) or an OpenHands event list")


def _done(read: tuple[list[TestCommand], int]) -> tuple[TestCommand, ...] | None:
    """The test commands of a transcript read, None when it ran no command at all; test
    commands on another tree (``git stash``) are left out."""
    commands, seen = read
    if not seen:
        return None
    return tuple(c for c in commands if not _OTHER_TREE.search(c.command))


def _chat(messages: list[dict]) -> tuple[list[TestCommand], int]:
    """OpenAI tool calls (and legacy ``function_call``) answered by ``tool`` / ``function``
    messages; Anthropic ``tool_use`` blocks answered by ``tool_result`` blocks."""
    calls: list[tuple[str | None, str]] = []
    answers: dict[str, str] = {}
    legacy: list[str] = []
    for m in messages:
        for call in m.get("tool_calls") or ():
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                calls.append((call.get("id"), _command_of(call["function"].get("arguments"))
                              or ""))
        if isinstance(m.get("function_call"), dict):
            ident = f"legacy-{len(legacy)}"
            calls.append((ident, _command_of(m["function_call"].get("arguments")) or ""))
            legacy.append(ident)
        if m.get("role") == "tool" and m.get("tool_call_id"):
            answers[m["tool_call_id"]] = _text(m.get("content"))
        if m.get("role") == "function" and legacy and legacy[-1] not in answers:
            answers[legacy[-1]] = _text(m.get("content"))
        _blocks(m.get("content"), calls, answers)
    out = []
    for call_id, command in calls:
        if is_test_command(command):
            if call_id is not None and call_id in answers:
                passed, why = _result(command, answers[call_id])
            else:
                passed, why = None, "no message answers the call"
            out.append(TestCommand(command, passed, why))
    return out, len(calls)


def _blocks(content, calls: list, answers: dict) -> None:
    """Anthropic content blocks: ``tool_use`` into ``calls``, ``tool_result`` into
    ``answers``."""
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        if block.get("type") in ("tool_use", "server_tool_use"):
            calls.append((block.get("id"), _command_of(block.get("input")) or ""))
        elif block.get("type") == "tool_result" and block.get("tool_use_id"):
            answers[block["tool_use_id"]] = _text(block.get("content"))


def _swe_agent(steps: list) -> tuple[list[TestCommand], int]:
    out, seen = [], 0
    for step in steps:
        if not isinstance(step, dict) or not isinstance(step.get("action"), str):
            continue
        action = step["action"].strip()
        seen += bool(action)
        if is_test_command(action):
            passed, why = _result(action, _text(step.get("observation")))
            out.append(TestCommand(action, passed, why))
    return out, seen


def _openhands(events: list[dict]) -> tuple[list[TestCommand], int]:
    out: list[TestCommand] = []
    pending: dict = {}
    seen = 0
    for e in events:
        if e.get("action") in ("run", "run_ipython"):
            seen += 1
            command = _command_of(e.get("args"))
            if command and is_test_command(command):
                pending[e.get("id")] = len(out)
                out.append(TestCommand(command, None, "no observation of the command"))
        elif e.get("observation") in ("run", "run_ipython"):
            extras = e.get("extras") or {}
            index = pending.pop(e.get("cause"), None)
            if index is None and isinstance(extras.get("command"), str):
                index = next((i for i, c in enumerate(out)
                              if c.command == extras["command"] and c.passed is None), None)
            if index is not None:
                meta = extras.get("metadata")
                meta = meta if isinstance(meta, dict) else {}
                code = extras.get("exit_code", meta.get("exit_code"))
                passed, why = _result(out[index].command, _text(e.get("content")),
                                      code if isinstance(code, int) else None)
                out[index] = TestCommand(out[index].command, passed, why)
    return out, seen


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
