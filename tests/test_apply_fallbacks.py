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


def test_a_hunk_whose_counts_differ_from_its_body_is_named_and_only_recounted():
    from proctor.patch import apply_variants, miscounted_hunks

    two = PATCH.replace("@@ -1,2 +1,2 @@", "@@ -1,1 +1,1 @@")  # smaller than its body
    assert miscounted_hunks(PATCH.encode()) == []
    assert miscounted_hunks(PATCH.replace("\n \n", "\n\n").encode()) == []  # lost spaces
    assert miscounted_hunks(two.encode()) == [
        "pkg/mod.py @@ -1,1 +1,1 @@: body has 2/2 lines"]
    assert [n for n, _, _ in apply_variants(two.encode())] == [
        "git_apply_recount", "git_apply_lf_recount"]
    assert [n for n, _, _ in apply_variants(PATCH.encode())][0] == "git_apply"


@pytest.mark.docker
def test_a_fix_whose_hunk_counts_are_smaller_than_its_body_is_applied_whole(
        toolz_task, docker_ready):
    # plain `git apply` applies such a hunk up to its counts and says it applied: half of
    # the reference fix (its first change of two) was scored, 0.66 instead of 0.998
    from proctor import score

    ref = (toolz_task / "reference.patch").read_bytes()
    short = ref.replace(b"@@ -805,13 +805,13 @@", b"@@ -805,6 +805,6 @@")
    assert short != ref
    rec = score(toolz_task, short, rollout_id="short-counts")
    assert rec.status == "scored" and rec.apply_strategy == "git_apply_recount"
    assert rec.reward == pytest.approx(0.998)
    assert rec.evidence["apply"].details == {"recounted_hunks": [
        "toolz/itertoolz.py @@ -805,6 +805,6 @@ def getter(index):: body has 13/13 lines"]}


def test_a_patch_without_prefixes_is_tried_with_p0_first_and_read_so_for_integrity():
    from proctor.patch import applied_as, apply_variants

    bare = PATCH.replace("a/pkg", "pkg").replace("b/pkg", "pkg")
    names = [n for n, _, _ in apply_variants(bare.encode())]
    assert names[0] == "git_apply_p0" and "git_apply" in names
    assert applied_as(bare.encode(), "git_apply_recount_p0")[0] == ["--recount", "-p0"]
    # -p1 would read "mod.py"; -p0 reads the path as written: both are checked
    assert git_listed_paths(bare.encode()) == {"mod.py"}
    assert git_listed_paths(bare.encode(), p0=True) == {"pkg/mod.py"}
    assert _git_paths_as_applied(bare.encode()) == {"pkg/mod.py", "mod.py"}
    assert [n for n, _, _ in apply_variants(PATCH.encode())][0] == "git_apply"


def test_a_hunk_without_context_gets_the_unidiff_zero_strategies():
    from proctor.patch import applied_as, apply_variants

    zero = PATCH.replace("@@ -1,2 +1,2 @@\n def f():\n", "@@ -2 +2 @@\n")
    names = [n for n, _, _ in apply_variants(zero.encode())]
    assert names[:2] == ["git_apply", "git_apply_recount"]
    assert "git_apply_unidiff_zero" in names
    assert applied_as(zero.encode(), "git_apply_unidiff_zero")[0] == ["--unidiff-zero"]
    assert not any(n.endswith("_unidiff_zero") for n, _, _ in apply_variants(PATCH.encode()))


@pytest.mark.docker
def test_patches_without_prefixes_or_context_score_like_the_reference(toolz_task, docker_ready):
    from proctor import score

    ref = (toolz_task / "reference.patch").read_bytes()
    bare = ref.replace(b"a/toolz/", b"toolz/").replace(b"b/toolz/", b"toolz/")
    rec = score(toolz_task, bare, rollout_id="p0")
    assert rec.status == "scored" and rec.apply_strategy == "git_apply_p0", rec.error
    assert rec.reward == pytest.approx(0.998)
    lines = ref.decode().splitlines(keepends=True)
    # the same fix as two hunks with no context (what `git diff -U0` writes)
    head = "".join(lines[:4])
    removed = [(i, ln) for i, ln in enumerate(lines) if ln.startswith("-") and i > 3]
    added = [ln for ln in lines if ln.startswith("+") and not ln.startswith("+++")]
    start = int(lines[4].split()[1].split(",")[0][1:])
    body = "".join(f"@@ -{start + i - 5} +{start + i - 5} @@\n{old}{new}"
                   for (i, old), new in zip(removed, added, strict=True))
    rec = score(toolz_task, (head + body).encode(), rollout_id="u0")
    assert rec.status == "scored" and rec.apply_strategy == "git_apply_unidiff_zero", \
        (rec.error, rec.evidence["apply"].output)
    assert rec.reward == pytest.approx(0.998)


def test_a_format_patch_signature_after_a_complete_hunk_is_no_miscount():
    from proctor.patch import apply_variants, miscounted_hunks

    signed = PATCH + "-- \n2.39.5\n\n"
    assert miscounted_hunks(signed.encode()) == []
    assert [n for n, _, _ in apply_variants(signed.encode())][0] == "git_apply"
    # a removed line reading "-- " inside a hunk still counts
    inside = PATCH.replace("@@ -1,2 +1,2 @@", "@@ -1,3 +1,2 @@").replace(
        "-    return 1\n", "-    return 1\n-- \n")
    assert miscounted_hunks(inside.encode()) == []
