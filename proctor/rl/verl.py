"""verl adapter: the ``compute_score`` of verl's reward loop (verl 0.9).

Dataset (parquet) fields it reads: ``reward_model.ground_truth`` = the task directory (or a
dict with ``task``), optional ``extra_info`` keys ``task`` (overrides), ``patch`` (explicit
patch, see :mod:`proctor.rl.extract`), ``rollout_id``, ``group_id``, ``sample_index``.
``data_source`` is not used. ``solution_str`` is the decoded response only.

verl 0.9 config (``main_ppo``; the naive reward manager is the default)::

    reward:
      custom_reward_function:
        path: pkg://proctor.rl.verl      # or the file path of this module
        name: compute_score
      reward_manager:
        source: register
        name: naive
      num_workers: 1

How verl 0.9.1 calls it (``verl/experimental/reward_loop``): ``reward.num_workers`` Ray
actors (``RewardLoopWorker``, default 8, each a process) get a share of the batch; each
gathers one ``NaiveRewardManager.run_single`` per sample on its event loop, which decodes
the response (``skip_special_tokens=True``) and runs this function with keywords
``data_source, solution_str, ground_truth, extra_info`` in the loop's default thread pool
(``min(32, cores + 4)`` threads); ``extra_info`` gains ``num_turns`` and
``rollout_reward_scores`` (and an agent loop's ``extra_fields``, where ``patch`` may come
from). So calls come from many threads of several processes at once; Proctor caps the
sandboxes they start (``PROCTOR_MAX_SANDBOXES``, see docs/sandboxes.md) and the rest wait; one
worker is enough on one machine. The returned dict's ``score`` is the reward, every key
goes to ``reward_extra_info`` (all samples must have the same keys, which they do).

Legacy (verl < 0.9): the top-level ``custom_reward_function`` and
``reward_model.reward_manager`` keys. verl 0.9's ``main_ppo`` never reads them (it scores
with its built-in ``default_compute_score``); ``reward_model.reward_manager: batch`` has no
0.9 counterpart (``Unknown reward manager: batch``). :func:`compute_score_batch` is that
legacy batch manager's form.

Every sample returns the same all-numeric keys (:data:`VERL_KEYS`). ``valid`` is 1.0 for a
scored record and 0.0 for a harness error (also a sample naming no task, a missing task
directory); an error's ``score`` is 0.0 (verl has no mask), so filter or weight on
``valid``. Null components are reported as 0.0. Never raises for a bad sample.
"""

from __future__ import annotations

from proctor.harness.batch import BAD_INPUT, BatchOptions, error_record
from proctor.record import RewardRecord
from proctor.rewards import COMPONENTS
from proctor.rl.completions import NO_PATCH, Completion, parser_options, score_completions

VERL_KEYS = ("score", "valid", "integrity_violation", "tripwire", "no_patch", "public_f2p",
             "hidden_f2p", "public_broken", "hidden_broken", "diff_cost", *COMPONENTS,
             "duration_s")


def to_verl_dict(rec: RewardRecord) -> dict[str, float]:
    """The record as verl's per-sample dict: every key of :data:`VERL_KEYS`, floats only."""
    ok = rec.status == "scored"
    out = dict.fromkeys(VERL_KEYS, 0.0)
    out.update(score=float(rec.reward) if ok else 0.0, valid=1.0 if ok else 0.0,
               integrity_violation=float(rec.integrity.violated), tripwire=float(
                   rec.flags.tripwire), no_patch=float(rec.reason == NO_PATCH),
               diff_cost=float(rec.diff_cost), duration_s=float(rec.timing.get("total_s", 0.0)))
    for suite in ("public", "hidden"):
        t = rec.tests.get(suite)
        if t is not None:
            out[f"{suite}_f2p"] = float(t.f2p or 0.0)
            out[f"{suite}_broken"] = float(t.broken)
    for name in COMPONENTS:
        value = rec.components.get(name)
        out[name] = float(value) if value is not None else 0.0
    return out


def _completion(solution_str: str, ground_truth, extra_info: dict | None,
                parsers: dict[str, str]) -> Completion | RewardRecord:
    info = dict(extra_info) if isinstance(extra_info, dict) else {}
    gt_task = ground_truth.get("task") if isinstance(ground_truth, dict) else ground_truth
    task = info.get("task") or gt_task
    ids = dict(rollout_id=info.get("rollout_id"), group_id=info.get("group_id"))
    if not isinstance(task, str) or not task.strip():
        return error_record(kind=BAD_INPUT, **ids,
                            message=f"verl sample without a task (got {task!r}): set "
                                    "reward_model.ground_truth (or extra_info['task']) to the "
                                    "task directory")
    sample = info.get("sample_index")
    return Completion(task=task, completion=solution_str, patch=info.get("patch"), **ids,
                      sample_index=int(sample) if sample is not None else None, **parsers)


def _score(entries: list[Completion | RewardRecord], workers: int | None
           ) -> list[dict[str, float]]:
    todo = [e for e in entries if isinstance(e, Completion)]
    scored = iter(score_completions(todo, BatchOptions(workers=workers)) if todo else [])
    return [to_verl_dict(next(scored) if isinstance(e, Completion) else e) for e in entries]


def compute_score(data_source, solution_str, ground_truth, extra_info=None, *,
                  reasoning_parser: str | None = None, tool_call_parser: str | None = None,
                  **kwargs) -> dict[str, float]:
    """verl's per-sample ``compute_score``; ``data_source`` is not used. Safe from many
    threads at once. ``reasoning_parser`` / ``tool_call_parser`` (verl's
    ``reward_kwargs``): the model family's syntaxes, vLLM's parser names
    (:func:`proctor.rl.completions.parser_options`).

    Returns:
        ``{"score": reward, "valid": 1.0 | 0.0, ...}`` with every key of :data:`VERL_KEYS`.

    Raises:
        ValueError: an unknown parser name (the first sample stops the run).
    """
    parsers = parser_options(reasoning_parser, tool_call_parser)
    return _score([_completion(solution_str, ground_truth, extra_info, parsers)], 1)[0]


def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos=None,  # noqa: PLR0913
                        workers: int | None = None, *, reasoning_parser: str | None = None,
                        tool_call_parser: str | None = None, **kwargs
                        ) -> list[dict[str, float]]:
    """Legacy (verl < 0.9 ``BatchRewardManager``): lists in, one dict per sample out, in
    order, scored ``workers`` at a time (default: cores); the parsers as in
    :func:`compute_score`."""
    n = len(solution_strs)
    parsers = parser_options(reasoning_parser, tool_call_parser)
    infos = list(extra_infos) if extra_infos is not None else [None] * n
    entries = [_completion(s, g, e, parsers) for s, g, e in zip(solution_strs, ground_truths,
                                                                 infos, strict=True)]
    return _score(entries, workers)
