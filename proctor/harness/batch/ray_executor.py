"""Ray executor (``--executor ray``, extra ``proctor[ray]``): one Ray task per group.

* A group's rollouts (same ``group_id``; a rollout without one is a group of its own) run
  in one task, one after the other, so they share the worker's prepared task (image,
  baseline) and its result cache; groups run in parallel.
* Cluster: the current one when ``ray.is_initialized()``; else ``RAY_ADDRESS`` when set;
  else a local one, ``ray.init(num_cpus=workers, include_dashboard=False,
  resources={"docker_slots": workers})`` (never an address of another machine). The local
  cluster's workers get the driver's ``PYTHONPATH`` (the ``proctor`` the driver imported),
  ``PROCTOR_CACHE_DIR`` and ``TMPDIR``. It stays up for the life of the process, so later
  batches do not pay its start-up again.
* Custom resource ``docker_slots``: each group task asks for one, so a node runs at most
  as many containers at once as it advertises (``ray start --resources
  '{"docker_slots": 4}'``). On a cluster that advertises none, tasks ask for 1 CPU instead.

Records are identical to the local executor's (same :class:`RolloutScorer`); they come back
as JSON, group by group.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from proctor.harness.batch.options import BatchConfigError, BatchOptions
from proctor.harness.batch.retry import BLOCKED
from proctor.harness.batch.rollout import shared_rollout_scorer
from proctor.harness.batch.rollout_io import BatchItem, Rollout, error_record
from proctor.record import RewardRecord

DOCKER_SLOTS = "docker_slots"


def _worker_env() -> dict[str, str]:
    import proctor

    env = {"PYTHONPATH": os.pathsep.join(
        [str(Path(proctor.__file__).resolve().parents[1])]
        + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    for name in ("PROCTOR_CACHE_DIR", "TMPDIR", "DOCKER_HOST"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    return env


def connect(workers: int):
    """The ``ray`` module, connected as the module docstring says.

    Raises:
        BatchConfigError: Ray is not installed.
    """
    try:
        import ray
    except ImportError:
        raise BatchConfigError("--executor ray needs Ray: pip install 'proctor[ray]'") from None
    if ray.is_initialized():
        return ray
    if os.environ.get("RAY_ADDRESS"):
        ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False)
        return ray
    extra = {}
    if not os.environ.get("RAY_TMPDIR") and len(os.path.join(tempfile.gettempdir(), "ray")) > 40:
        # Ray's socket paths live under its temp dir and AF_UNIX paths stop at 107 bytes.
        extra["_temp_dir"] = "/tmp/ray"
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
             resources={DOCKER_SLOTS: float(workers)},
             runtime_env={"env_vars": _worker_env()}, **extra)
    return ray


def group_items(items: list[BatchItem]) -> list[list[BatchItem]]:
    """Items by ``group_id`` in first-seen order; ungrouped items alone (pure)."""
    groups: dict[object, list[BatchItem]] = {}
    for it in items:
        gid = it.rollout.group_id
        key = ("group", gid) if gid is not None else ("alone", it.index)
        groups.setdefault(key, []).append(it)
    return list(groups.values())


def score_group(options: BatchOptions, payload: list[tuple[int, dict, int | None]]
                ) -> list[tuple[int, str]]:
    """Body of one Ray task: score the group's rollouts in order in this worker process;
    returns ``(index, record JSON)`` pairs."""
    rs = shared_rollout_scorer(options)
    out = []
    for index, rollout, line in payload:
        rec = rs.score_item(BatchItem(index, Rollout.model_validate(rollout), line))
        out.append((index, rec.to_json()))
    return out


def run_on_ray(items: list[BatchItem], options: BatchOptions
               ) -> Iterator[tuple[int, RewardRecord]]:
    """Submit one task per group and yield ``(index, record)`` as groups finish."""
    ray = connect(options.n_workers)
    if ray.cluster_resources().get(DOCKER_SLOTS):
        task_options = {"num_cpus": 0, "resources": {DOCKER_SLOTS: 1}}
    else:
        task_options = {"num_cpus": 1}
    remote = ray.remote(score_group).options(max_retries=0, **task_options)
    worker_options = BatchOptions(workers=1, executor="local", sandbox=options.sandbox,
                                  image=options.image, cache=options.cache,
                                  retry=options.retry, overlap=options.overlapped)
    groups = {}
    for group in group_items(items):
        ref = remote.remote(worker_options, [(it.index, it.rollout.model_dump(), it.line)
                                             for it in group])
        groups[ref] = group
    pending = list(groups)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            try:
                results = ray.get(done[0])
            except Exception as exc:  # noqa: BLE001 - a lost worker fails its group only
                results = [(it.index, _lost(it, exc).to_json()) for it in groups[done[0]]]
            for index, text in results:
                yield index, RewardRecord.model_validate_json(text)
    finally:
        for ref in pending:  # an abandoned batch does not keep the cluster busy
            ray.cancel(ref)


def _lost(item: BatchItem, exc: Exception) -> RewardRecord:
    r = item.rollout
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return error_record(rollout_id=r.rollout_id, task=r.task, group_id=r.group_id,
                        sample_index=r.sample_index, metadata=r.metadata, kind=BLOCKED,
                        message=f"Ray task of the group failed: {type(exc).__name__}: {first}")
