"""The optional ``performance`` component: task config, weights, metric parsing (no I/O)."""

from __future__ import annotations

import pytest

from proctor.errors import TaskConfigError
from proctor.rewards import target_score
from proctor.suites.benchmark import expand, parse_metric
from proctor.task import BenchmarkConfig, TaskConfig, load_task

BASE = {"id": "t", "sources": ["pkg"], "tests": {"public": ["tests"]}}


def cfg(**bench) -> TaskConfig:
    return TaskConfig.model_validate({**BASE, "benchmark": {"command": ["x"], **bench}})


def test_issue_examples_of_the_target_rule():
    assert target_score(2.0, 2.0, 1.0) == 1.0          # measured == target
    assert target_score(2.2, 2.0, 1.0) == pytest.approx(0.9)  # 10 % over, tolerance 1.0
    assert target_score(4.0, 2.0, 1.0) == 0.0          # double


@pytest.mark.parametrize("target", [0, -1.0, float("nan")])
def test_non_positive_target_is_a_configuration_error(target):
    with pytest.raises(ValueError, match="target must be > 0"):
        BenchmarkConfig(command=["x"], target=target)


def test_non_positive_target_in_task_toml_names_the_field(tmp_path):
    (tmp_path / "repo" / "pkg").mkdir(parents=True)
    (tmp_path / "repo" / "tests").mkdir()
    (tmp_path / "hidden").mkdir()
    (tmp_path / "hidden" / "test_h.py").write_text("def test_h(): pass\n")
    (tmp_path / "task.toml").write_text(
        'id = "t"\nsources = ["pkg"]\n[tests]\npublic = ["tests"]\n'
        '[benchmark]\ncommand = ["x"]\ntarget = 0\n')
    with pytest.raises(TaskConfigError, match=r"field 'benchmark.target'.*target must be > 0"):
        load_task(tmp_path)


def test_sources_matching_no_file_is_a_configuration_error(tmp_path):
    (tmp_path / "repo" / "tests").mkdir(parents=True)
    (tmp_path / "hidden").mkdir()
    (tmp_path / "hidden" / "test_h.py").write_text("def test_h(): pass\n")
    (tmp_path / "task.toml").write_text(
        'id = "t"\nsources = ["nosuchpkg"]\n[tests]\npublic = ["tests"]\n')
    with pytest.raises(TaskConfigError, match="field 'sources': 'nosuchpkg' matches no file"):
        load_task(tmp_path)


def test_weights_without_benchmark_are_as_given():
    c = TaskConfig.model_validate(BASE)
    assert c.effective_weights() == c.weights
    assert c.effective_weights().performance == 0.0


def test_benchmark_weight_is_carved_out_of_the_others():
    w = cfg(target=1.0, weight=0.2).effective_weights().as_dict()
    assert w["performance"] == 0.2
    assert sum(w.values()) == pytest.approx(1.0)
    assert w["hidden_tests"] == pytest.approx(0.35 * 0.8)
    assert w["public_tests"] / w["compiled"] == pytest.approx(2.5)  # ratios kept


@pytest.mark.parametrize("output,value", [
    ("calls=42\n", 42.0),
    ("warming up\ncalls: 3.5e2\n", 350.0),
    ("calls=1\ncalls=2\n", 2.0),          # the last line wins
    ("  calls = .5  \n", 0.5),
    ("ncalls=7\n", None),                 # another name
    ("calls=fast\n", None),
    ("", None),
])
def test_parse_metric(output, value):
    assert parse_metric(output, "calls") == value


def test_expand_fills_placeholders():
    assert expand(["{python}", "{bench}/b.py", "--repo={repo}"], repo="/work/repo",
                  bench_dir="/proctor/b-1") == [
        "/opt/proctor/venv/bin/python", "/proctor/b-1/b.py", "--repo=/work/repo"]
