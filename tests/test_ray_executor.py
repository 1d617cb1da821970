"""``--executor ray`` on a real local Ray cluster (2 CPUs, ``docker_slots`` 2): records are
the local executor's, field for field, apart from ``timing`` and ``evidence`` (durations and
output tails of the commands run)."""

from __future__ import annotations

import json

import pytest

from proctor import score_batch
from proctor.harness.batch import parse_jsonl
from proctor.harness.batch.ray_executor import DOCKER_SLOTS, group_items

ray = pytest.importorskip("ray", reason="Ray not installed (pip install 'proctor[ray]')")


def test_group_items_keeps_groups_together_and_singletons_alone():
    lines = [json.dumps({"task": "t", "patch": "p", "rollout_id": rid, "group_id": g})
             for rid, g in (("a", "g1"), ("b", None), ("c", "g1"), ("d", "g2"), ("e", None))]
    groups = group_items(parse_jsonl(lines))
    assert [[it.rollout.rollout_id for it in g] for g in groups] == [
        ["a", "c"], ["b"], ["d"], ["e"]]


@pytest.fixture
def fresh_local_cluster(monkeypatch):
    if ray.is_initialized():
        ray.shutdown()
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    yield
    ray.shutdown()


@pytest.mark.docker
def test_ray_records_match_local_executor(fresh_local_cluster, toolz_task, toolz_patches):
    names = ["reference", "partial", "empty", "violation_hidden_tests",
             "comment_mentions_hidden", "reference"]
    rollouts = [{"task": str(toolz_task), "patch": toolz_patches[n].decode(),
                 "rollout_id": f"{i}-{n}", "group_id": f"g{i % 2}", "sample_index": i}
                for i, n in enumerate(names)]
    rollouts.append({"task": str(toolz_task), "rollout_id": "no-patch-field"})

    local = score_batch(rollouts, workers=2, cache=False)
    on_ray = score_batch(rollouts, workers=2, executor="ray", cache=False)

    assert ray.is_initialized()
    resources = ray.cluster_resources()
    assert resources["CPU"] == 2 and resources[DOCKER_SLOTS] == 2
    assert [r.rollout_id for r in on_ray] == [r.rollout_id for r in local]
    for a, b in zip(local, on_ray, strict=True):
        assert b.model_dump(exclude={"timing", "evidence"}) == \
               a.model_dump(exclude={"timing", "evidence"})
    assert on_ray[0].reward == pytest.approx(0.998)
    assert on_ray[3].integrity.violated and on_ray[6].error.kind == "bad_input"


@pytest.mark.docker
def test_ray_uses_an_existing_cluster_without_docker_slots(fresh_local_cluster, toolz_task,
                                                          toolz_patches):
    from pathlib import Path

    import proctor

    # A cluster the user started (no docker_slots resource): Proctor joins it, tasks ask
    # for one CPU each. Its workers import this checkout of proctor.
    root = str(Path(proctor.__file__).resolve().parents[1])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir="/tmp/ray",
             runtime_env={"env_vars": {"PYTHONPATH": root}})
    rollouts = [{"task": str(toolz_task), "patch": toolz_patches[n].decode(),
                 "rollout_id": n, "group_id": n} for n in ("partial", "empty")]
    got = score_batch(rollouts, workers=2, executor="ray")
    assert DOCKER_SLOTS not in ray.cluster_resources()
    assert [r.reward for r in got] == [pytest.approx(0.6573333), 0.0]
    assert got[1].reason == "empty_patch"
