"""The reward record: one JSON object per rollout (JSONL for batches). design.md section 6.

Everything here crosses a boundary (CLI output, batch files, trainers), so it is a
pydantic model with a versioned ``schema``. ``reward`` is a float with no floor and no
clamp when ``status == "scored"`` (about -1.0 .. 1.0), and ``None`` when ``status ==
"error"``: an infrastructure failure is never a score.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticSerializationError

SCHEMA = "proctor.reward/1"

#: A test's outcome in a patched run. Only ``passed`` counts as passed. ``timeout``: killed
#: at the per-test limit; ``crashed``: the test process died while it ran; ``not_run``: the
#: suite ended (its budget, or a fault no new session could get past) before it ran;
#: ``unverified``: it passed in a session that ended before its tripwires reported, and no
#: later session could run it again; ``missing``: never collected.
Outcome = Literal[
    "passed", "failed", "error", "skipped", "xfailed", "xpassed", "missing", "timeout",
    "crashed", "not_run", "unverified",
]


class Integrity(BaseModel):
    """Verdict of the integrity phase. ``paths`` are the normalised touched paths."""

    violated: bool = False
    reasons: list[str] = []
    paths: list[str] = []


class Flags(BaseModel):
    """Signals for the trainer. ``exclude_from_advantage``: drop this rollout from the
    group's advantage computation (set on harness errors and on tampering verdicts that a
    person should look at). ``degraded``: a measuring tool failed (e.g. mutmut did not
    start); the component it feeds is null with the tool's message, never a silent 0."""

    tests_tampered: bool = False
    tripwire: bool = False
    exclude_from_advantage: bool = False
    suppressions_added: bool = False
    secret_in_patch: bool = False
    #: A measurement could not be taken for a reason that is not the patch's (the tool
    #: failed to start, a benchmark printed no metric): its component is null and re-shared.
    degraded: bool = False
    #: The agent's message claims what the measurements or its transcript contradict
    #: (tests pass, bug fixed, tests added; ``evidence["message"]`` says which): a penalty
    #: and a hard blocker of the gate.
    false_claim: bool = False
    #: A judge vetoed the record: its reward is capped and its gate is FAIL
    #: (``evidence["judge"]`` says why).
    judge_veto: bool = False


class SuiteTests(BaseModel):
    """Per-suite test outcomes in FAIL_TO_PASS / PASS_TO_PASS form.

    ``fail_to_pass`` and ``pass_to_pass`` map test id -> outcome in the patched run. A test
    counts as passed only if its outcome is ``passed``.
    """

    fail_to_pass: dict[str, Outcome] = {}
    pass_to_pass: dict[str, Outcome] = {}
    quarantined: list[str] = []
    f2p_passed: int = 0
    f2p_total: int = 0
    p2p_failed: int = 0
    p2p_total: int = 0

    @property
    def f2p(self) -> float | None:
        """Share of FAIL_TO_PASS tests now passing (0..1), None when the suite has none."""
        return self.f2p_passed / self.f2p_total if self.f2p_total else None

    @property
    def broken(self) -> float:
        """Share of PASS_TO_PASS tests now failing (0..1); 0 when the suite has none."""
        return self.p2p_failed / self.p2p_total if self.p2p_total else 0.0


class Evidence(BaseModel):
    """What was run for one component or phase: command, exit code, seconds, output tail."""

    command: str = ""
    exit_code: int | None = None
    duration_s: float = 0.0
    output: str = ""
    details: dict = {}


class ErrorInfo(BaseModel):
    """Why a record has ``status == "error"`` (no reward: the harness, the task or the input
    failed, not the patch). ``kind``: the :class:`~proctor.errors.ProctorError` kind
    (``task_config``, ``infra``, ``image_missing``, ...) or the batch's own
    (``bad_input``, ``blocked``, ``cancelled``, ``internal_error``); ``retryable``: another
    attempt may succeed (the machine, not the task, was wrong)."""

    kind: str
    message: str
    retryable: bool = False


class EnvInfo(BaseModel):
    """What the record was scored with, to reproduce or compare it: the Proctor version,
    the environment handed to the backend and its content id (``image`` /
    ``image_digest``, :func:`proctor.sandbox.backends.resolve_env`: a Docker tag and image
    id, or the local venv dir and ``local-venv:<hash>``; None when the record ended before
    the baseline), the task's fingerprint and the patch's SHA-256 (hex). ``sandbox``: the
    backend that scored it (``docker``, ``local``); None when the record ended before one
    was chosen."""

    proctor_version: str
    sandbox: str | None = None
    image: str | None = None
    image_digest: str | None = None
    task_fingerprint: str | None = None
    patch_sha256: str | None = None


class Verdict(BaseModel):
    """Gate verdict for human use: score = total * 100; PASS >= 80, WARN 65..79, FAIL < 65."""

    score: float
    gate: Literal["PASS", "WARN", "FAIL"]
    blockers: list[str] = []
    #: The rule that decided the gate, e.g. ``"score 99.8 >= 80"`` or
    #: ``"hard blocker: secret in added lines: a.py:3 (AWS Access Key)"``.
    rule: str = ""


class Measurements(BaseModel):
    """Inputs of the pure reward function, as recorded by the executor.

    Component values are in 0..1 or None (not applicable / not measured). Suites map
    ``"public"`` / ``"hidden"`` to their FAIL_TO_PASS / PASS_TO_PASS figures.
    ``penalty_indicators`` holds 0..1 indicators for subtler cheating (tests weakened,
    reference data altered); the visible-only indicator is derived from the suites.
    """

    compiled: float | None = None
    mutation_score: float | None = None
    static_analysis: float | None = None
    performance: float | None = None
    suites: dict[str, SuiteTests] = {}
    diff_lines: int = 0
    penalty_indicators: dict[str, float] = {}
    notes: dict[str, str] = {}
    #: A judge's veto capped the reward here (:mod:`proctor.harness.judge`); None: no cap.
    reward_cap: float | None = None


class RewardRecord(BaseModel):
    """The result for one rollout.

    ``reason`` names an honest failure of the patch (``empty_patch``, ``patch_too_large``,
    ``patch_not_utf8``, ``patch_unparseable``, ``did_not_apply``, ``integrity_violation``)
    or is None for a patch that was measured in full.
    """

    model_config = ConfigDict(populate_by_name=True)

    schema_: str = Field(SCHEMA, alias="schema")
    task_id: str
    rollout_id: str
    group_id: str | None = None
    sample_index: int | None = None
    status: Literal["scored", "error"]
    reward: float | None
    reason: str | None = None
    components: dict[str, float | None] = {}
    component_notes: dict[str, str] = {}
    weights: dict[str, float] = {}
    penalties: dict[str, float] = {}
    diff_cost: float = 0.0
    progress: float | None = None
    integrity: Integrity = Integrity()
    flags: Flags = Flags()
    tests: dict[str, SuiteTests] = {}
    evidence: dict[str, Evidence] = {}
    apply_strategy: str | None = None
    verdict: Verdict | None = None
    error: ErrorInfo | None = None
    timing: dict[str, float] = {}
    env: EnvInfo
    measurements: Measurements | None = None
    #: The rollout's ``metadata`` from a batch input line, passed through untouched.
    metadata: dict | None = None

    def to_json(self) -> str:
        """One line of JSON. Strings that are not valid Unicode (a file name git gave as
        C-quoted non-UTF-8 bytes arrives as lone surrogates: ``\\377`` -> ``\\udcff``) are
        written backslash-escaped, so no patch can make its record unserialisable (which
        took down a whole batch)."""
        try:
            return self.model_dump_json(by_alias=True)
        except PydanticSerializationError:
            data = _escape_surrogates(self.model_dump(mode="python", by_alias=True))
            return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def _escape_surrogates(obj: Any) -> Any:
    if isinstance(obj, str):
        return obj.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(obj, dict):
        return {_escape_surrogates(k): _escape_surrogates(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_escape_surrogates(v) for v in obj]
    return obj
