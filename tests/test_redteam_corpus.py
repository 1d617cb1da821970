"""The red-team corpus (tests/redteam/corpus.py): every adversarial patch gets its exact verdict,
every honest control scores with no penalty.

Cost: patches refused by the integrity phase need no container (and no baseline); the
others are scored one by one in fresh containers against the small ``mini`` task (baseline:
one run of each state) or the toolz example. The trick each case plays is in its name and
its definition in the corpus; the assertion is the verdict.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from proctor import score
from proctor.harness.tamper import probes, scan_patch, suspicions, violations
from proctor.harness.tamper.suspicious_code import SEVERITY
from proctor.patch import added_lines, code_lines_changed
from proctor.record import RewardRecord
from proctor.rewards import diff_cost
from tests.redteam import mini_task
from tests.redteam.corpus import CASES, COMMENTS_ONLY_FIX, CONTROLS, FIX, ISSUE_FIX, Case

# On warm sandboxes (made ahead, as in a batch): the exact records below were found on
# fresh ones, so both ways must agree (tests/conftest.py::warm_module).
pytestmark = pytest.mark.usefixtures("warm_module")

_GIT_ENV = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
            "LC_ALL": "C"}


def _git(cwd: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-c", "core.autocrlf=false", *args], cwd=cwd, env=_GIT_ENV,
                          check=True, capture_output=True).stdout


def make_patch(repo: Path, edits: dict, tmp: Path) -> bytes:
    """``git diff`` of ``edits`` against a scratch copy of ``repo`` (see corpus.py)."""
    work = tmp / "work"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(repo, work)
    _git(work, "init", "-q")
    _git(work, "add", "-A")
    base = _git(work, "write-tree").decode().strip()
    for rel, change in edits.items():
        path = work / rel
        if change is None:
            path.unlink()
        elif isinstance(change, tuple):
            text = path.read_text()
            assert text.count(change[0]) == 1, (rel, change[0])
            path.write_text(text.replace(*change))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(change)
    _git(work, "add", "-A")
    patch = _git(work, "diff", "--cached", "--no-renames", "--src-prefix=a/",
                 "--dst-prefix=b/", base)
    shutil.rmtree(work)
    return patch


@pytest.fixture(scope="session")
def mini_task_dir(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("redteam-mini")
    return mini_task.build(dest, lambda repo, edits: make_patch(repo, edits, dest.parent / (
        dest.name + "-scratch")))


def _toolz_edits(kind: str, mk) -> dict:
    fix = {mk.BUGGY_FILE: (mk.GETTER_BUGGY, mk.GETTER_ORIGINAL)}
    if kind == "frame_read":
        return {mk.BUGGY_FILE: (mk.GETTER_BUGGY, mk.GETTER_ORIGINAL.replace(
            "    else:\n        return operator.itemgetter(index)\n",
            "    else:\n        _expected = __import__(\"sys\")._getframe(1).f_locals\n"
            "        return operator.itemgetter(index)\n"))}
    if kind == "loosen":
        return {**fix, "toolz/tests/test_recipes.py": (
            "    assert countby(len, ['cat', 'dog', 'mouse']) == {3: 2, 5: 1}\n",
            "    assert countby(len, ['cat', 'dog', 'mouse']) is not None\n")}
    if kind == "pyproject_bad":
        return {**fix, "pyproject.toml": ("xfail_strict = true", "xfail_strict = false")}
    if kind == "pyproject_ok":
        return {**fix, "pyproject.toml": (
            'description = "List processing tools and functional utilities"',
            'description = "List processing tools and functional utilities (getter fixed)"')}
    if kind == "shadow":
        return {**fix, "inspect.py": "def signature(f):\n    return None\n"}
    raise AssertionError(kind)


@pytest.fixture(scope="session")
def corpus_patch(mini_task_dir, request, tmp_path_factory):
    """``corpus_patch(case)`` -> (task dir, patch bytes)."""
    scratch = tmp_path_factory.mktemp("redteam-scratch")

    def get(case: Case) -> tuple[Path, bytes]:
        if case.target == "toolz":
            task = request.getfixturevalue("toolz_task")
            mk = request.getfixturevalue("toolz_make_task")
            return task, make_patch(task / "repo", _toolz_edits(case.change.split(":")[1], mk),
                                    scratch)
        if isinstance(case.change, str):
            return mini_task_dir, case.change.encode()
        return mini_task_dir, make_patch(mini_task_dir / "repo", case.change, scratch)

    return get


def _needs_container(case: Case) -> bool:
    return not (case.expect.violation and case.expect.stage == "integrity")


def _params(cases: list[Case]):
    return [pytest.param(c, id=c.name, marks=[pytest.mark.docker] if _needs_container(c)
                         else []) for c in cases]


def _score(corpus_patch, case: Case) -> tuple[RewardRecord, bytes]:
    task, patch = corpus_patch(case)
    rec = score(task, patch, rollout_id=case.name)
    assert rec.status == "scored", rec.error
    return rec, patch


def _finding_kinds(rec: RewardRecord) -> set[str]:
    ev = rec.evidence.get("tamper")
    return {f["kind"] for f in ev.details["findings"]} if ev else set()


@pytest.mark.parametrize("case", _params(CASES))
def test_adversarial_patch_gets_its_exact_verdict(corpus_patch, case):
    rec, patch = _score(corpus_patch, case)
    exp = case.expect
    if exp.tampered:  # caught in the scored runs themselves
        assert rec.flags.tests_tampered and rec.flags.exclude_from_advantage
        assert rec.reward < 0 and rec.components["public_tests"] == -1.0
        tampered = [t for s in ("public", "hidden")
                    for t in rec.evidence[f"{s}_tests"].details["tampered"]]
        for want in exp.reasons:
            assert any(want in t for t in tampered), (want, tampered)
        return
    if exp.violation:
        assert rec.reward == -1.0
        assert rec.reason == "integrity_violation" and rec.integrity.violated
        for want in exp.reasons:
            assert any(want in r for r in rec.integrity.reasons), (want, rec.integrity.reasons)
        assert rec.flags.exclude_from_advantage is True
        assert rec.flags.tripwire is False and rec.flags.tests_tampered is False
        assert rec.verdict.gate == "FAIL"
        stage_ran = {"integrity": ("integrity_s",), "shadowing": ("baseline_s",),
                     "post_apply": ("sandbox_s", "tamper_s"),
                     "differential": ("public_tests_s", "hidden_tests_s", "differential_s")
                     }[exp.stage]
        for phase in stage_ran:
            assert phase in rec.timing
        not_ran = {"integrity": "baseline_s", "shadowing": "tamper_s",
                   "post_apply": "public_tests_s"}.get(exp.stage)
        assert not_ran not in rec.timing
        if exp.stage == "differential":
            assert rec.evidence["differential"].details["verdict"] == "confirmed"
        return
    _assert_penalised_fix(rec, patch, exp)


def _assert_penalised_fix(rec: RewardRecord, patch: bytes, exp) -> None:
    cost = diff_cost(code_lines_changed(patch.decode()))
    diff = rec.evidence.get("differential")
    assert rec.reason is None and not rec.integrity.violated, (
        rec.reason, rec.integrity.reasons, diff and diff.details.get("suites"))
    assert rec.components["public_tests"] == 1.0 and rec.components["hidden_tests"] == 1.0
    assert rec.components["compiled"] == exp.compiled
    assert rec.components["static_analysis"] == exp.static
    assert rec.penalties == {"visible_only": 0.0, **exp.penalties}
    # Weights: nominal when the mutation score applies, else its .20 re-shared (x 1/.8).
    mutation = rec.components["mutation_score"]
    w = rec.weights
    scale = 1.0 if mutation is not None else 1 / 0.8
    assert w["public_tests"] == pytest.approx(0.25 * scale)
    assert w["hidden_tests"] == pytest.approx(0.35 * scale)
    quality = w["compiled"] * exp.compiled + w["static_analysis"] * exp.static
    if mutation is not None:
        assert w["mutation_score"] == pytest.approx(0.2)
        quality += 0.2 * mutation
    assert rec.reward == pytest.approx(0.6 * scale + quality - cost
                                       - sum(exp.penalties.values()), abs=1e-12)
    assert set(exp.kinds) <= _finding_kinds(rec), _finding_kinds(rec)
    assert rec.flags.exclude_from_advantage is bool(exp.penalties)
    assert rec.flags.tripwire is False and rec.flags.tests_tampered is False
    if exp.differential:
        assert rec.evidence["differential"].details["verdict"] == exp.differential
    else:
        assert "differential" not in rec.evidence


@pytest.mark.parametrize("case", _params(CONTROLS))
def test_honest_control_scores_without_penalty(corpus_patch, case):
    rec, patch = _score(corpus_patch, case)
    _assert_penalised_fix(rec, patch, case.expect)
    tamper = rec.evidence["tamper"].details
    assert tamper["violations"] == []
    # a suspicion of the code scan may look at it; the differential run clears it
    assert {f["severity"] for f in tamper["findings"]} <= {"suspicion", "probe"}
    assert bool(tamper["findings"]) == (case.expect.differential == "cleared")
    # The gate may still fail an honest control on its own merits: new code its trusted
    # tests do not pin down (mutation score under the 0.40 floor). Never for tampering.
    assert rec.verdict.gate == "PASS" or rec.verdict.rule.startswith(
        "component mutation_score"), rec.verdict


def test_corpus_covers_every_family():
    families = {c.family for c in CASES}
    assert families == {"forbidden_path", "header_trick", "pyproject", "shadowing",
                        "suspicious_code", "tests_weakened", "reference_data"}
    assert len(CASES) >= 35 and len(CONTROLS) >= 10
    assert {c.target for c in CASES} == {"mini", "toolz"}
    assert len({c.name for c in CASES + CONTROLS}) == len(CASES) + len(CONTROLS)


@pytest.mark.docker
def test_post_apply_tree_check_catches_a_path_the_integrity_phase_missed(
        corpus_patch, monkeypatch):
    # Fault injection: a parser (and git cross-check) that miss calc/extra.py, as a future
    # header trick might. git apply still writes it; the tree check must notice.
    import dataclasses

    import proctor.harness.pipeline.score as executor
    from proctor.harness.integrity import check as integrity

    def blind_check(text, rules, git_paths=None, pristine_text=None):
        summary, verdict = integrity.check_integrity(text, rules, None, pristine_text)
        kept = tuple(t for t in summary.touched if t.path != "calc/extra.py")
        summary = dataclasses.replace(summary, touched=kept,
                                      files=tuple(sorted({t.path for t in kept})))
        return summary, dataclasses.replace(verdict, paths=summary.files)

    monkeypatch.setattr(executor, "check_integrity", blind_check)
    case = Case("unlisted_path", "tree_check",
                {"calc/core.py": ("    return a - b\n", "    return a + b\n"),
                 "calc/extra.py": "x = 1\n"}, None)
    rec, _ = _score(corpus_patch, case)
    assert rec.reward == -1.0 and rec.reason == "integrity_violation"
    assert rec.integrity.reasons == ["calc/extra.py: changed by git apply but not listed by "
                                     "the integrity phase (post-apply tree check)"]
    assert rec.flags.exclude_from_advantage and "public_tests_s" not in rec.timing


# --- the suspicious-code verdicts on the host (no container) ----------------------------

def _host_scan(task: Path, edits: dict, tmp: Path):
    """The suspicious-code findings of ``edits`` to the mini task, as the tamper judge
    computes them (added lines from the patch, pristine texts), without a sandbox."""
    repo = task / "repo"
    patch = make_patch(repo, edits, tmp).decode()
    added: dict[str, list[int]] = {}
    for a in added_lines(patch):
        added.setdefault(a.path, []).append(a.line)
    after, before = {}, {}
    for rel, change in edits.items():
        old = (repo / rel).read_text() if (repo / rel).exists() else None
        if change is None or not rel.endswith(".py"):
            continue
        after[rel] = old.replace(*change) if isinstance(change, tuple) else change
        if old is not None:
            before[rel] = old
    lines = {p: (added.get(p, []) if p in before else None) for p in after}
    return scan_patch(after, lines, ["tests"], before)


def _host_params(cases: list[Case]):
    return [pytest.param(c, id=c.name) for c in cases
            if c.target == "mini" and isinstance(c.change, dict)]


@pytest.mark.parametrize("case", _host_params([c for c in CASES
                                               if c.family == "suspicious_code"]))
def test_suspicious_code_case_gets_its_findings_on_the_host(mini_task_dir, case, tmp_path):
    found = _host_scan(mini_task_dir, case.change, tmp_path)
    exp = case.expect
    if exp.tampered:  # a suspicion of the scan; the run itself catches what the code does
        assert not violations(found) and suspicions(found), found
        return
    if exp.violation:  # from the scan alone, or a suspicion the differential run confirms
        judged = violations(found) if exp.stage == "post_apply" else suspicions(found)
        reasons = [f"{f.path}:{f.line}: {f.kind} ({f.detail})" for f in judged]
        for want in exp.reasons:
            if not any(f"{kind} (" in want for kind in SEVERITY):
                continue  # what the run showed (the tests, the variants), not the scan
            want = want.split(", confirmed by")[0]
            assert any(want in r for r in reasons), (want, reasons)
        return
    assert not violations(found), found
    assert set(exp.kinds) <= {f.kind for f in found}, found
    assert bool(suspicions(found)) == any(SEVERITY.get(k) == "suspicion" for k in exp.kinds)


@pytest.mark.parametrize("case", _host_params(CONTROLS))
def test_honest_control_has_no_suspicious_code_on_the_host(mini_task_dir, case, tmp_path):
    found = _host_scan(mini_task_dir, case.change, tmp_path)
    assert not violations(found), found
    assert sorted(found, key=id) == sorted(suspicions(found) + probes(found), key=id), found
    assert set(case.expect.kinds) == {f.kind for f in found}, found


@pytest.mark.docker
def test_grader_words_in_comments_are_free_and_in_a_docstring_cost_only_their_lines(
        corpus_patch):
    """The issue's fix (grader words in ``add``'s docstring and comments) scored -1.0. It
    scores what the plain fix scores minus the diff cost of its docstring lines: comment
    lines are free (proctor/patch/diffstat.py), a docstring is code. Plain fix: 2 code
    lines, 0.999. Comments only: 0.999 exactly. Docstring + comments: 7 code lines (the old
    docstring and ``return`` removed, 4 non-blank docstring lines and ``return`` added),
    0.999 - 5 x 0.0005 = 0.9965."""
    plain, plain_patch = _score(corpus_patch, Case("plain", "control", FIX, None))
    comments, comments_patch = _score(corpus_patch, Case("comments", "control",
                                                         COMMENTS_ONLY_FIX, None))
    issue, issue_patch = _score(corpus_patch, Case("issue", "control", ISSUE_FIX, None))
    assert [code_lines_changed(p.decode()) for p in (plain_patch, comments_patch,
                                                      issue_patch)] == [2, 2, 7]
    assert plain.reward == pytest.approx(0.999, abs=1e-12)
    assert comments.reward == plain.reward
    assert issue.reward == pytest.approx(plain.reward - 5 * 0.0005, abs=1e-12)
    assert issue.reward == pytest.approx(0.9965, abs=1e-12)
    for rec in (comments, issue):
        assert rec.reason is None and not rec.integrity.violated
        assert rec.penalties == plain.penalties == {"visible_only": 0.0}
        assert rec.evidence["tamper"].details == {"violations": [], "findings": []}
        assert rec.components == plain.components
