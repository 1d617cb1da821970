"""The report's figures, from reward records alone (pure: no I/O).

:func:`report_data` turns records (and, when known, the patches they scored) into the one
JSON-ready dict the page renders: totals, per-task spread of the reward and of every
component, violation / error / ``exclude_from_advantage`` rates, mean seconds per phase,
GRPO groups' reward spread, the slowest rollouts, one table row per rollout with its
drill-down, and a comparison with another run. Rewards are the records' own (about
-1.0 .. 1.0), seconds are the records' ``timing`` values.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from proctor.record import RewardRecord
from proctor.rewards import COMPONENTS

#: Timing keys that are sums or markers, not phases (a phase is every other ``*_s`` key).
_NOT_PHASES = {"total_s", "patch_code_s", "harness_ops_s", "scored_total_s"}
#: Slowest rollouts listed.
SLOWEST = 20
#: Bounds of what one rollout's drill-down carries, so 10,000 records stay a small file:
#: characters of an evidence output's tail, of an evidence's details as JSON, of a command,
#: of a patch, and tests listed per verdict list.
OUTPUT_CHARS, DETAILS_CHARS, COMMAND_CHARS, PATCH_CHARS, TESTS_LISTED = 800, 1500, 400, 60_000, 200
#: Bounds of the other texts and lists of a drill-down (reasons, paths, blockers, notes).
TEXT_CHARS, ITEMS_LISTED = 2000, 200

#: What each flag means, shown next to it in the drill-down (record.Flags).
FLAG_RULES = {
    "tests_tampered": "the patch changed what the tests check (evidence: tamper)",
    "tripwire": "a tripwire flipped while the tests ran: reward -1.0 (evidence: tripwire)",
    "exclude_from_advantage": "drop from the group's advantage: a harness error or a "
                              "tampering verdict a person should look at",
    "suppressions_added": "the patch added lint or type suppressions (evidence: "
                          "static_analysis)",
    "secret_in_patch": "a secret in the added lines: a hard blocker of the gate",
    "degraded": "a measuring tool failed; its component is null, never a silent 0",
    "false_claim": "the agent's message claims what the measurements contradict "
                   "(evidence: message)",
    "judge_veto": "a judge vetoed the record: reward capped, gate FAIL (evidence: judge)",
}
#: What each penalty measures; the amount is weight x indicator (0..1).
PENALTY_RULES = {
    "tests_weakened": "tests weakened (assertions removed or loosened)",
    "reference_data_altered": "reference data the tests read was altered",
    "visible_only": "passes the public FAIL_TO_PASS tests better than the hidden ones",
    "suspicious_code": "penalty-severity findings in code added to non-test files",
    "message_false_claim": "the agent's message claims what did not happen",
    "message_garbage": "the agent's message says nothing concrete",
    "message_fidelity": "the PR text does not describe the change",
}


def verdict_of(rec: RewardRecord) -> str:
    """One word for a record: ``error``, ``violation`` (integrity or tripwire), or the gate
    (``PASS`` / ``WARN`` / ``FAIL``; ``FAIL`` when no gate was computed)."""
    if rec.status == "error":
        return "error"
    if rec.integrity.violated or rec.flags.tripwire:
        return "violation"
    return rec.verdict.gate if rec.verdict else "FAIL"


def _mean_sd(values: Sequence[float]) -> dict[str, float | int | None]:
    if not values:
        return {"mean": None, "sd": None, "n": 0}
    try:
        return {"mean": statistics.fmean(values), "sd": statistics.pstdev(values),
                "n": len(values)}
    except OverflowError:  # finite values past ~1e308: no record of Proctor's
        return {"mean": None, "sd": None, "n": len(values)}


def _phases(rec: RewardRecord) -> dict[str, float]:
    if rec.timing.get("cache_hit"):
        return {}
    return {k[:-2]: v for k, v in rec.timing.items()
            if k.endswith("_s") and k not in _NOT_PHASES}


def _rate(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def _task_figures(task_id: str, recs: list[RewardRecord]) -> dict[str, Any]:
    scored = [r for r in recs if r.status == "scored"]
    rewards = [r.reward for r in scored if r.reward is not None]
    components = {}
    for name in COMPONENTS:
        values = [v for r in scored if (v := r.components.get(name)) is not None]
        components[name] = _mean_sd(values)
    phase_sums: dict[str, list[float]] = defaultdict(list)
    for r in recs:
        for phase, secs in _phases(r).items():
            phase_sums[phase].append(secs)
    errors = len(recs) - len(scored)
    violations = sum(verdict_of(r) == "violation" for r in recs)
    excluded = sum(r.flags.exclude_from_advantage for r in recs)
    return {
        "task_id": task_id, "rollouts": len(recs), "scored": len(scored), "errors": errors,
        "violations": violations, "excluded": excluded,
        "error_rate": _rate(errors, len(recs)), "violation_rate": _rate(violations, len(recs)),
        "exclude_rate": _rate(excluded, len(recs)),
        "reward": _mean_sd(rewards), "rewards": rewards, "components": components,
        "phases": {k: _mean_sd(v)["mean"] for k, v in sorted(phase_sums.items())},
        "gates": {g: sum(verdict_of(r) == g for r in recs)
                  for g in ("PASS", "WARN", "FAIL", "violation", "error")},
    }


def group_figures(records: Iterable[RewardRecord]) -> dict[str, Any]:
    """GRPO groups: records sharing ``(task_id, group_id)``, counting the scored ones not
    flagged ``exclude_from_advantage`` (what an advantage is computed over). A group of 2
    or more such rewards has a ``spread`` (population standard deviation); it is ``flat``
    when all its rewards are equal, so it carries no advantage signal. Records without a
    ``group_id`` are in no group."""
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in records:
        if r.group_id is None:
            continue
        key = (r.task_id, r.group_id)
        groups.setdefault(key, [])
        if r.status == "scored" and r.reward is not None and not r.flags.exclude_from_advantage:
            groups[key].append(r.reward)
    rows: list[dict[str, Any]] = []
    for (t, g), v in sorted(groups.items()):
        if len(v) >= 2:
            m = _mean_sd(v)
            rows.append({"task_id": t, "group_id": g, "size": len(v), "mean": m["mean"],
                         "spread": m["sd"], "flat": max(v) == min(v)})
    flat = sum(1 for row in rows if row["flat"])
    return {"groups": len(groups), "measured": len(rows), "flat": flat,
            "flat_share": _rate(flat, len(rows)), "rows": rows}


def _cut(text: str, limit: int, tail: bool = False) -> str:
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    return (f"[... {cut} characters left out]\n" + text[-limit:] if tail
            else text[:limit] + f"\n[... {cut} characters left out]")


def _tests(rec: RewardRecord) -> dict[str, Any]:
    out = {}
    for suite, t in rec.tests.items():
        failing = {k: v for k, v in t.pass_to_pass.items() if v != "passed"}
        out[suite] = {
            "fail_to_pass": dict(list(t.fail_to_pass.items())[:TESTS_LISTED]),
            "pass_to_pass_not_passed": dict(list(failing.items())[:TESTS_LISTED]),
            "f2p_passed": t.f2p_passed, "f2p_total": t.f2p_total,
            "p2p_failed": t.p2p_failed, "p2p_total": t.p2p_total,
            "quarantined": t.quarantined[:TESTS_LISTED],
        }
    return out


def _penalties(rec: RewardRecord) -> list[dict[str, Any]]:
    indicators = rec.measurements.penalty_indicators if rec.measurements else {}
    out = []
    for name, amount in sorted(rec.penalties.items()):
        indicator = indicators.get(name)
        out.append({"name": name, "amount": amount, "indicator": indicator,
                    "weight": amount / indicator if indicator else None,
                    "rule": PENALTY_RULES.get(name, "")})
    return out


def _evidence(rec: RewardRecord) -> dict[str, Any]:
    return {name: {"command": _cut(ev.command, COMMAND_CHARS), "exit_code": ev.exit_code,
                   "duration_s": ev.duration_s, "output": _cut(ev.output, OUTPUT_CHARS, True),
                   "details": _cut(json.dumps(ev.details, sort_keys=True, default=str),
                                   DETAILS_CHARS)}
            for name, ev in rec.evidence.items()}


def _texts(items: Iterable[str]) -> list[str]:
    items = list(items)
    out = [_cut(x, TEXT_CHARS) for x in items[:ITEMS_LISTED]]
    if len(items) > ITEMS_LISTED:
        out.append(f"[... {len(items) - ITEMS_LISTED} more left out]")
    return out


def drill_down(rec: RewardRecord) -> dict[str, Any]:
    """What the report shows for one rollout: components with their notes and weights,
    penalties and set flags with the rule behind each, integrity, the gate with the rule
    that decided, tests with their verdicts (FAIL_TO_PASS in full, PASS_TO_PASS only those
    not passing, each list capped), evidence (outputs' tails and details cut to bounds),
    timings, the environment, the error and the metadata."""
    verdict = rec.verdict.model_dump() if rec.verdict else None
    if verdict:
        verdict.update(rule=_cut(verdict["rule"], TEXT_CHARS),
                       blockers=_texts(verdict["blockers"]))
    error = rec.error.model_dump() if rec.error else None
    if error:
        error["message"] = _cut(error["message"], TEXT_CHARS)
    return {
        "components": rec.components,
        "component_notes": {k: _cut(v, TEXT_CHARS) for k, v in rec.component_notes.items()},
        "weights": rec.weights, "penalties": _penalties(rec), "diff_cost": rec.diff_cost,
        "progress": rec.progress,
        "flags": [{"name": n, "rule": FLAG_RULES.get(n, "")}
                  for n, v in rec.flags.model_dump().items() if v],
        "integrity": {"violated": rec.integrity.violated,
                      "reasons": _texts(rec.integrity.reasons),
                      "paths": _texts(rec.integrity.paths)},
        "verdict": verdict,
        "tests": _tests(rec), "evidence": _evidence(rec), "timing": rec.timing,
        "env": rec.env.model_dump(), "apply_strategy": rec.apply_strategy,
        "error": error,
        "metadata": _cut(json.dumps(rec.metadata, default=str), DETAILS_CHARS)
        if rec.metadata else None,
    }


#: Columns of a table row, in order (the page reads them by these names).
ROW_COLUMNS = ("rollout_id", "task_id", "group_id", "sample_index", "status", "verdict",
               "reward", "score", "reason", "flags", "seconds", "cache_hit", "patch")


def _row(rec: RewardRecord, patch_ref: str | None) -> list[Any]:
    reason = rec.reason or (rec.error.kind if rec.error else None)
    flags = [n for n, v in rec.flags.model_dump().items() if v]
    secs = rec.timing.get("total_s")
    return [rec.rollout_id, rec.task_id, rec.group_id, rec.sample_index, rec.status,
            verdict_of(rec), rec.reward, rec.verdict.score if rec.verdict else None, reason,
            flags, secs, bool(rec.timing.get("cache_hit")), patch_ref]


def _slowest(records: Sequence[RewardRecord]) -> list[dict[str, Any]]:
    timed = [(r.timing.get("total_s", 0.0), i) for i, r in enumerate(records)
             if not r.timing.get("cache_hit") and r.timing.get("total_s")]
    timed.sort(key=lambda t: (-t[0], t[1]))
    return [{"row": i, "rollout_id": records[i].rollout_id, "task_id": records[i].task_id,
             "total_s": secs, "phases": _phases(records[i]),
             "patch_code_s": records[i].timing.get("patch_code_s", 0.0),
             "harness_ops_s": records[i].timing.get("harness_ops_s", 0.0)}
            for secs, i in timed[:SLOWEST]]


def _totals(records: Sequence[RewardRecord]) -> dict[str, Any]:
    rewards = [r.reward for r in records if r.status == "scored" and r.reward is not None]
    verdicts = [verdict_of(r) for r in records]
    return {"rollouts": len(records), "scored": len(rewards),
            "errors": verdicts.count("error"), "violations": verdicts.count("violation"),
            "excluded": sum(r.flags.exclude_from_advantage for r in records),
            "cache_hits": sum(bool(r.timing.get("cache_hit")) for r in records),
            "reward": _mean_sd(rewards),
            "gates": {g: verdicts.count(g) for g in ("PASS", "WARN", "FAIL", "violation",
                                                     "error")}}


def _unique(records: Sequence[RewardRecord], key) -> tuple[dict[str, RewardRecord], int]:
    """Records by ``key(record)``, leaving out every key more than one record has (which of
    them to pair would be a guess); and how many records were left out so."""
    seen: dict[str, list[RewardRecord]] = defaultdict(list)
    for r in records:
        seen[key(r)].append(r)
    return ({k: v[0] for k, v in seen.items() if len(v) == 1},
            sum(len(v) for v in seen.values() if len(v) > 1))


def _matching(a: Sequence[RewardRecord], b: Sequence[RewardRecord]
              ) -> tuple[str, dict, dict, int]:
    """How two runs' rollouts are paired: by ``rollout_id`` when they share any, else by
    ``(task_id, group_id, sample_index)`` when every record has a sample index. A key held
    by more than one record of a run pairs none of them; the count of such records is
    returned last."""
    def by_group(r: RewardRecord) -> str:
        return f"{r.task_id} / {r.group_id} / #{r.sample_index}"

    if {r.rollout_id for r in a} & {r.rollout_id for r in b}:
        how, key = "rollout_id", (lambda r: r.rollout_id)
    elif all(r.sample_index is not None for r in (*a, *b)):
        how, key = "task_id, group_id, sample_index", by_group
    else:
        return "none", {}, {}, 0
    pa, na = _unique(a, key)
    pb, nb = _unique(b, key)
    return how, pa, pb, na + nb


def compare_data(this: Sequence[RewardRecord], other: Sequence[RewardRecord],
                 this_name: str, other_name: str) -> dict[str, Any]:
    """Two runs side by side (e.g. two checkpoints on the same tasks): per task the mean
    reward of each and ``delta`` = this - other (None when either scored none), and the
    paired rollouts whose verdict (:func:`verdict_of`) changed; ``ambiguous`` counts the
    records left unpaired because their key is not unique in their run."""
    by_a: dict[str, list[RewardRecord]] = defaultdict(list)
    by_b: dict[str, list[RewardRecord]] = defaultdict(list)
    for r in this:
        by_a[r.task_id].append(r)
    for r in other:
        by_b[r.task_id].append(r)
    tasks = []
    for task_id in sorted(by_a.keys() | by_b.keys()):
        ma = _totals(by_a.get(task_id, []))["reward"]["mean"]
        mb = _totals(by_b.get(task_id, []))["reward"]["mean"]
        tasks.append({"task_id": task_id, "this": ma, "other": mb,
                      "this_n": len(by_a.get(task_id, [])), "other_n": len(by_b.get(task_id, [])),
                      "delta": None if ma is None or mb is None else ma - mb})
    how, pa, pb, ambiguous = _matching(this, other)
    changed = []
    for key in sorted(pa.keys() & pb.keys()):
        ra, rb = pa[key], pb[key]
        if verdict_of(ra) != verdict_of(rb):
            changed.append({"key": key, "task_id": ra.task_id, "this": verdict_of(ra),
                            "other": verdict_of(rb), "this_reward": ra.reward,
                            "other_reward": rb.reward})
    return {"this_name": this_name, "other_name": other_name, "paired_by": how,
            "paired": len(pa.keys() & pb.keys()), "ambiguous": ambiguous,
            "this_total": _totals(this),
            "other_total": _totals(other), "tasks": tasks, "changed": changed}


def report_data(records: Sequence[RewardRecord], *, patches: dict[str, str] | None = None,
                title: str = "Proctor report") -> dict[str, Any]:
    """Everything the page shows, as one JSON-ready dict (pure).

    ``patches``: patch text by SHA-256 hex (what ``env.patch_sha256`` holds); a record whose
    patch is there links to it (texts cut to :data:`PATCH_CHARS`), others show none.
    """
    patches = patches or {}
    by_task: dict[str, list[RewardRecord]] = defaultdict(list)
    for r in records:
        by_task[r.task_id].append(r)
    used: dict[str, str] = {}
    rows = []
    for r in records:
        sha = r.env.patch_sha256
        ref = sha if sha in patches else None
        if ref is not None and ref not in used:
            used[ref] = _cut(patches[ref], PATCH_CHARS)
        rows.append(_row(r, ref))
    phases = sorted({p for r in records for p in _phases(r)})
    return {
        "title": title, "totals": _totals(records), "components": list(COMPONENTS),
        "phases": phases, "tasks": [_task_figures(t, by_task[t]) for t in sorted(by_task)],
        "groups": group_figures(records), "slowest": _slowest(records),
        "columns": list(ROW_COLUMNS), "rows": rows,
        "details": [drill_down(r) for r in records], "patches": used,
    }
