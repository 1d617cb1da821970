"""pyproject.toml judged per section (proctor.harness.integrity.pyproject_rules) and in the
integrity phase (check_integrity with the pristine texts)."""

from __future__ import annotations

import pytest

from proctor.harness.integrity import ForbiddenRules, check_integrity, judge_pyproject

BASE = """\
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "pkg"
version = "1.0"
description = "old"
dependencies = []

[tool.pytest.ini_options]
addopts = "-q"

[tool.black]
line-length = 88
"""


@pytest.mark.parametrize(("old", "new"), [
    ('description = "old"', 'description = "new words"'),
    ('version = "1.0"', 'version = "1.1"'),
    ("dependencies = []", 'dependencies = ["attrs>=22"]'),
    ("line-length = 88", "line-length = 100"),
    ('addopts = "-q"', "addopts = '-q'"),  # same value, other quoting
])
def test_harmless_edits_are_allowed(old, new):
    assert judge_pyproject(BASE, BASE.replace(old, new)) == []


@pytest.mark.parametrize(("edit", "reason"), [
    (('addopts = "-q"', 'addopts = "-q -p no:cacheprovider"'), "[tool.pytest]"),
    (("[tool.black]", '[tool.ruff]\nignore = ["E"]\n\n[tool.black]'), "[tool.ruff]"),
    (("[tool.black]", "[tool.coverage.run]\nomit = ['*']\n\n[tool.black]"), "[tool.coverage]"),
    (("[tool.black]", "[tool.mutmut]\npaths_to_mutate = 'x'\n\n[tool.black]"), "[tool.mutmut]"),
    (('requires = ["setuptools"]', 'requires = ["evil"]'), "[build-system]"),
    (("[tool.black]", '[project.entry-points.pytest11]\nx = "pkg.plugin"\n\n[tool.black]'),
     "[project.entry-points.pytest11]"),
])
def test_guarded_sections_are_violations(edit, reason):
    reasons = judge_pyproject(BASE, BASE.replace(*edit))
    assert reasons == [f"{reason} changed (guarded section)"]


def test_deleting_the_file_removes_guarded_sections():
    assert judge_pyproject(BASE, None) == ["[build-system] changed (guarded section)",
                                           "[tool.pytest] changed (guarded section)"]


def test_unparseable_patched_file_is_a_violation():
    assert judge_pyproject(BASE, BASE + "[[[")[0].startswith("patched pyproject.toml is not valid")


def test_new_file_with_only_project_table_is_allowed():
    assert judge_pyproject(None, '[project]\nname = "x"\n') == []


def _diff(old: str, new: str, path: str = "pyproject.toml") -> str:
    import difflib
    body = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                        f"a/{path}", f"b/{path}"))
    return f"diff --git a/{path} b/{path}\n" + body


def test_integrity_judges_pyproject_per_section_given_pristine_texts():
    rules = ForbiddenRules.for_task()
    allowed = _diff(BASE, BASE.replace('"old"', '"new"'))
    _, v = check_integrity(allowed, rules, pristine_text={"pyproject.toml": BASE}.get)
    assert not v.violated
    _, v = check_integrity(allowed, rules)  # no pristine texts: forbidden whole
    assert v.violated
    bad = _diff(BASE, BASE.replace('addopts = "-q"', 'addopts = "-x"'))
    _, v = check_integrity(bad, rules, pristine_text={"pyproject.toml": BASE}.get)
    assert v.reasons == ("pyproject.toml: [tool.pytest] changed (guarded section)",)


def test_task_pattern_naming_pyproject_still_forbids_it_whole():
    rules = ForbiddenRules.for_task(["/pyproject.toml"])
    _, v = check_integrity(_diff(BASE, BASE.replace('"old"', '"new"')), rules,
                           pristine_text={"pyproject.toml": BASE}.get)
    assert v.violated


def test_deeply_nested_toml_is_a_violation_not_a_crash():
    assert judge_pyproject(BASE, BASE + "x = " + "[" * 5000 + "]" * 5000 + "\n")
