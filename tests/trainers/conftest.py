"""Fixtures of the trainer tests (run by ``bash scripts/test-trainers.sh``, see README
"Testing with the real trainers"): the candidate patches of the toolz example and their
``proctor.score`` rewards, the reference every trainer's rewards are compared with.

Each module skips at collection when its framework is not importable, so a plain
``pytest`` of the main suite collects them harmlessly; they are marked ``trainers``
(deselect with ``-m 'not trainers'``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from trainer_cases import PATCH_NAMES


def pytest_collection_modifyitems(items) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.trainers)


@pytest.fixture(scope="session", autouse=True)
def _our_helpers() -> None:
    """The helper modules come from this directory, not from a same-named module of a
    framework's site-packages (verl and OpenRLHF install a top-level ``tests``)."""
    import readme_snippets
    import tiny_lm
    import trainer_cases

    for module in (readme_snippets, tiny_lm, trainer_cases):
        assert Path(module.__file__).resolve().parent == Path(__file__).resolve().parent, \
            f"{module.__name__} imported from {module.__file__}"


@pytest.fixture(scope="session")
def expected_rewards(docker_ready, toolz_task, toolz_patches) -> dict[str, float]:
    """``proctor.score`` of each patch of :data:`PATCH_NAMES` (no result cache)."""
    import proctor

    out = {}
    for name in PATCH_NAMES:
        rec = proctor.score(toolz_task, toolz_patches[name], rollout_id=f"expected-{name}")
        assert rec.status == "scored", (name, rec.error)
        out[name] = rec.reward
    assert out["violation_hidden_tests"] < out["empty"] < out["partial"] < out["reference"]
    return out


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory) -> Path:
    """The tiny tokenizer and model saved as a ``from_pretrained`` directory."""
    from tiny_lm import save_tiny

    return save_tiny(tmp_path_factory.mktemp("tiny-lm"), with_model=True)
