"""The integrity cross-check reads the patch under the same fallbacks the apply step tries
(:data:`proctor.patch.apply.APPLY_STRATEGIES`): a patch without its final newline, with CRLF
line ends or wrong hunk counts (common in model output) is checked and scored like any other,
never refused as ``patch_unparseable`` (0.0) while the apply step could apply it."""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.harness.integrity import ForbiddenRules, check_integrity
from proctor.harness.pipeline.score import _git_paths_as_applied
from proctor.patch import PatchUnparseable, git_listed_paths

REDTEAM = Path(__file__).parent / "redteam"

PATCH = (
    "diff --git a/pkg/mod.py b/pkg/mod.py\n"
    "--- a/pkg/mod.py\n"
    "+++ b/pkg/mod.py\n"
    "@@ -1,2 +1,2 @@\n"
    " def f():\n"
    "-    return 1\n"
    "+    return 2\n"
)


def test_patch_without_final_newline_is_read_like_the_apply_fallback():
    data = PATCH.rstrip("\n").encode()
    with pytest.raises(PatchUnparseable):
        git_listed_paths(data)
    assert _git_paths_as_applied(data) == {"pkg/mod.py"}
    _, verdict = check_integrity(data.decode(), ForbiddenRules.for_task([]),
                                 _git_paths_as_applied(data))
    assert not verdict.violated


def test_garbage_is_still_unparseable():
    with pytest.raises(PatchUnparseable):
        _git_paths_as_applied(b"not a patch\n")


def test_union_covers_every_variant():
    assert _git_paths_as_applied(PATCH.encode()) == {"pkg/mod.py"}


def test_crlf_patch_is_listed_through_the_lf_fallback():
    data = PATCH.replace("\n", "\r\n").encode()
    assert _git_paths_as_applied(data) == {"pkg/mod.py"}


@pytest.mark.docker
def test_honest_fix_with_crlf_line_endings_applies(toolz_task, docker_ready):
    # the reference fix with CRLF line endings: its context lines carry a CR the repo's
    # files do not, so git apply found no match and it scored 0.0 did_not_apply
    from proctor import score

    ref = (toolz_task / "reference.patch").read_bytes()
    rec = score(toolz_task, ref.replace(b"\n", b"\r\n"), rollout_id="crlf")
    assert rec.status == "scored" and rec.apply_strategy == "git_apply_lf"
    assert rec.reward > 0.99


def test_hunk_counts_too_high_are_read_like_git_apply_recount():
    bad = PATCH.replace("@@ -1,2 +1,2 @@", "@@ -1,4 +1,4 @@")
    with pytest.raises(PatchUnparseable):
        check_integrity(bad, ForbiddenRules.for_task([]))
    summary, verdict = check_integrity(bad, ForbiddenRules.for_task([]),
                                       _git_paths_as_applied(bad.encode()), recount=True)
    assert list(summary.files) == ["pkg/mod.py"]
    assert not verdict.violated
    assert summary.added_line_numbers["pkg/mod.py"] == [2]


@pytest.mark.docker
def test_honest_fix_with_wrong_hunk_counts_applies_with_recount(toolz_task, docker_ready):
    # the reference fix with hunk counts one too high: refused as patch_unparseable by the
    # count-strict parser, and the --recount fallback was skipped for any patch ending in a
    # newline (its transform was a no-op, so the attempt was taken for a repeat)
    from proctor import score

    rec = score(toolz_task, (REDTEAM / "honest_fix_hunk_counts_too_high.patch").read_bytes(),
                rollout_id="recount")
    assert rec.status == "scored" and rec.apply_strategy == "git_apply_recount"
    assert rec.reward > 0.99
    # the host cannot read hunks with wrong counts (it raised, an internal error, once):
    # the sandbox makes the mutants, from what git apply --recount wrote
    assert rec.evidence["mutation"].details["generated_on"] == "sandbox"
