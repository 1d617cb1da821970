"""The integrity cross-check reads the patch as the apply step may: a patch without its final
newline (common in model output) used to be refused as ``patch_unparseable`` (0.0) by the
cross-check although ``apply_patch`` has a fallback for it, so an honest complete fix scored
as an empty patch."""

from __future__ import annotations

import pytest

from proctor.harness.executor import _git_paths_as_applied
from proctor.harness.forbidden import ForbiddenRules
from proctor.harness.integrity import PatchUnparseable, check_integrity, git_listed_paths

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
    _, verdict = check_integrity(data.decode(), ForbiddenRules.for_task([], []),
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
