"""TRL adapter: a ``GRPOTrainer`` reward function.

TRL calls ``reward_func(prompts=..., completions=..., completion_ids=..., **columns)``
where ``columns`` are the dataset's other columns (lists aligned with ``completions``) plus
``trainer_state``. It turns ``None`` into NaN and masks it, which is what an infrastructure
error must get. Async reward functions (``async def``) are awaited concurrently with the
others by recent TRL versions; :func:`make_reward_func` builds either kind.

Dataset columns read: ``task`` (task directory, required), ``patch`` (optional explicit
patch; else the patch found in the completion, see :mod:`proctor.rl.extract`). TRL's
``completion_ids`` let gpt-oss completions be read from their tokens
(:mod:`proctor.rl.harmony_tokens`).

    from proctor.rl.trl import make_reward_func
    trainer = GRPOTrainer(model=..., reward_funcs=[make_reward_func(workers=8)],
                          args=GRPOConfig(...), train_dataset=dataset)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from proctor.harness.batch import BatchOptions
from proctor.rl.completions import Completion, parser_options, score_completions


def make_reward_func(*, task_column: str = "task", patch_column: str = "patch",  # noqa: PLR0913
                     workers: int | None = None, is_async: bool = False,
                     name: str = "proctor", reasoning_parser: str | None = None,
                     tool_call_parser: str | None = None) -> Callable:
    """A TRL reward function: ``(prompts, completions, **columns) -> list[float | None]``
    (reward per completion, None for harness errors). ``is_async`` gives an ``async def``
    with the same signature. ``name`` becomes ``__name__`` (TRL logs ``rewards/<name>``).
    ``reasoning_parser`` / ``tool_call_parser``: the model family's syntaxes, vLLM's
    parser names (:func:`proctor.rl.completions.parser_options`; default ``auto``).

    Raises:
        ValueError: an unknown parser name (here, before training starts); the function
            raises it when the ``task_column`` is missing from the dataset.
    """
    options = BatchOptions(workers=workers)
    parsers = parser_options(reasoning_parser, tool_call_parser)

    def reward(prompts, completions, **columns) -> list[float | None]:
        n = len(completions)
        tasks = columns.get(task_column)
        if tasks is None:
            raise ValueError(f"dataset has no '{task_column}' column (the task directory of "
                             "each prompt); pass task_column= to make_reward_func")
        patches = columns.get(patch_column) or [None] * n
        ids = columns.get("completion_ids")
        ids = ids if isinstance(ids, list | tuple) and len(ids) == n else [None] * n
        entries = [Completion(task=str(t), completion=c, patch=p, **parsers,
                              token_ids=_ids(i) if isinstance(c, str) else None)
                   for t, c, p, i in zip(tasks, completions, patches, ids, strict=True)]
        return [r.reward if r.status == "scored" else None
                for r in score_completions(entries, options)]

    if is_async:
        async def areward(prompts, completions, **columns) -> list[float | None]:
            return await asyncio.to_thread(reward, prompts, completions, **columns)

        areward.__name__ = areward.__qualname__ = name
        return areward
    reward.__name__ = reward.__qualname__ = name
    return reward


def _ids(row) -> tuple[int, ...] | None:
    """One completion's token ids as a tuple of ints (a list or a tensor's ``tolist``), or
    None when they are not ints."""
    row = row.tolist() if hasattr(row, "tolist") else row
    if not isinstance(row, list | tuple) or not all(isinstance(t, int) for t in row):
        return None
    return tuple(row)
