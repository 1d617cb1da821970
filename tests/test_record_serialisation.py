"""A record always serialises: a non-UTF-8 file name (git C-quotes its bytes, ``"\\377x.py"``;
Python reads it back as a lone surrogate) used to make ``to_json`` raise, which killed a whole
``proctor batch`` (no record written, not even the other rollouts')."""

from __future__ import annotations

import json

from proctor.record import EnvInfo, Integrity, RewardRecord


def _record(**kw) -> RewardRecord:
    return RewardRecord(task_id="t", rollout_id="r", status="scored", reward=-1.0,
                        env=EnvInfo(proctor_version="x"), **kw)


def test_lone_surrogates_are_written_escaped():
    rec = _record(integrity=Integrity(violated=True, paths=["toolz/\udcffx.py"],
                                      reasons=["toolz/\udcffx.py: not listed"]))
    line = rec.to_json()
    data = json.loads(line)
    assert data["integrity"]["paths"] == ["toolz/\\udcffx.py"]
    assert RewardRecord.model_validate_json(line).reward == -1.0
    assert "\n" not in line


def test_valid_text_is_unchanged():
    rec = _record(integrity=Integrity(paths=["toolz/ÿx.py"]))
    assert rec.to_json() == rec.model_dump_json(by_alias=True)
