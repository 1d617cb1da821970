"""Pure helpers of the pipeline: patch screening, diff size, ruff finding diff, report parsing."""

import importlib.util

from proctor.patch import MAX_PATCH_BYTES, code_lines_changed, screen_patch
from proctor.suites import INCONTAINER
from proctor.suites.pytest_runner import parse_records
from proctor.suites.static_analysis import _tier

_spec = importlib.util.spec_from_file_location("static_check", INCONTAINER / "static_check.py")
static_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(static_check)
new_findings = static_check.new_findings  # the copy that runs in the sandbox


def test_screen_patch_reasons():
    assert screen_patch(b"").reason == "empty_patch"
    assert screen_patch(b"  \n\t\n").reason == "empty_patch"
    assert screen_patch(b"\xff\xfe diff").reason == "patch_not_utf8"
    big = screen_patch(b"x" * (MAX_PATCH_BYTES + 1))
    assert big.reason == "patch_too_large" and big.text is None
    ok = screen_patch(b"diff --git a/x b/x\n")
    assert ok.reason is None and ok.text == "diff --git a/x b/x\n" and len(ok.sha256) == 64


def test_code_lines_changed_ignores_blank_and_comment_lines():
    patch = (
        "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,5 @@\n"
        " keep\n-old = 1\n+new = 1\n+# mentions conftest.py\n+\n+    #indented comment\n"
        " keep\n"
    )
    assert code_lines_changed(patch) == 2


def _f(path, rule, text, line=1):
    return {"path": path, "rule": rule, "text": text, "line": line, "message": ""}


def test_new_findings_is_a_multiset_difference_on_path_rule_text():
    base = [_f("m.py", "F401", "import os", 1), _f("m.py", "E711", "x == None", 5)]
    patched = [_f("m.py", "F401", "import os", 3),       # same finding, shifted line
               _f("m.py", "E711", "x == None", 7),
               _f("m.py", "E711", "x == None", 9),       # a second copy is new
               _f("m.py", "F401", "import sys", 2)]      # import made unused: new
    fresh = new_findings(base, patched)
    assert [(f["rule"], f["text"], f["line"]) for f in fresh] == [
        ("E711", "x == None", 9), ("F401", "import sys", 2)]


def test_rule_tiers():
    assert _tier("F401") == "error" and _tier("E999") == "error" and _tier("B006") == "error"
    assert _tier("S307") == "error" and _tier("syntax") == "error"
    assert _tier("E711") == "style" and _tier("UP035") == "style"


def test_parse_records_reads_every_kind_and_counts_bad_ones():
    records = [
        '{"k": "started"}',
        '{"k": "raw", "id": "t.py::a", "v": "passed"}',
        '{"k": "test", "id": "t.py::a", "outcome": "passed", "duration": 0.1}',
        '{"k": "test", "id": "t.py::b", "outcome": "timeout", "duration": 5}',
        '{"k": "collection_error", "id": "u.py"}',
        '{"k": "tamper", "why": "replaced under the tests: x"}',
        '{"k": "test", "id": "t.py::b", "outcome": "passed", "duration": 5}',  # conflict
        '{"k": "session", "exitstatus": 1, "collected": 2}',
        '{"k": "test", "id": "t.py::c", "outc',  # cut short
        '[1, 2]',
    ]
    rep = parse_records(records)
    assert rep.started and rep.outcomes == {"t.py::a": "passed", "t.py::b": "passed"}
    assert rep.raw == {"t.py::a": "passed"} and rep.conflicts == ["t.py::b"]
    assert rep.session == {"k": "session", "exitstatus": 1, "collected": 2}
    assert rep.collection_errors == ["u.py"] and rep.tamper == ["replaced under the tests: x"]
    assert rep.malformed == 2  # the plugin never writes these: forged (judge_report)


def test_parse_records_never_raises_on_a_record_nested_too_deep():
    # red3 (tests/redteam/found/deep_json_record_unscored.patch): code under test that found
    # the channel wrote a nonce-tagged record nested 50,000 deep; json.loads raised
    # RecursionError on the host and the rollout came back as status error
    rep = parse_records(["[" * 50000 + "]" * 50000, '{"k": "started"}', '"x"', '{"k": "?"}'])
    assert rep.started and rep.malformed == 3


def test_a_result_that_inflates_past_the_cap_is_tampering_not_a_host_crash():
    # red3: code that learned the nonce could stream records without end; the host would
    # inflate and parse them all. Over MAX_RESULT_BYTES decompressed: tampering.
    import base64
    import zlib

    import pytest

    from proctor.suites import pytest_runner
    from proctor.suites.pytest_runner import RESULT_PREFIX, ResultAltered, read_runner_output

    bomb = zlib.compress(b"[" + b" " * (pytest_runner.MAX_RESULT_BYTES + 10) + b"]", 9)
    line = RESULT_PREFIX + base64.b64encode(bomb).decode()
    assert len(line) < pytest_runner.MAX_RESULT_BYTES // 100
    with pytest.raises(ResultAltered, match="over"):
        read_runner_output(line)
