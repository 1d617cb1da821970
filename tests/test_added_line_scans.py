"""Host-side scans of the lines a patch adds: added-line extraction, suppressions, secrets."""

from __future__ import annotations

import pytest

from proctor.harness.integrity import find_secrets, find_suppressions
from proctor.harness.integrity.secrets import shannon_entropy
from proctor.patch import AddedLine, added_lines

PATCH = """\
diff --git a/pkg/mod.py b/pkg/mod.py
--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -1,3 +1,4 @@
 import os
-x = 1
+x = 2  # noqa: F841
+y = 3
 z = 4
diff --git a/pkg/new.py b/pkg/new.py
new file mode 100644
--- /dev/null
+++ b/pkg/new.py
@@ -0,0 +1,2 @@
+# ruff: noqa
+import sys
diff --git a/old.py b/old.py
deleted file mode 100644
--- a/old.py
+++ /dev/null
@@ -1 +0,0 @@
-TOKEN = "ghp_1234567890abcdefghijABCDEFGHIJ123456"
"""


def line(text: str, path: str = "pkg/a.py", n: int = 1) -> AddedLine:
    return AddedLine(path, n, text)


def test_added_lines_have_target_paths_and_line_numbers():
    assert added_lines(PATCH) == [
        AddedLine("pkg/mod.py", 2, "x = 2  # noqa: F841"),
        AddedLine("pkg/mod.py", 3, "y = 3"),
        AddedLine("pkg/new.py", 1, "# ruff: noqa"),
        AddedLine("pkg/new.py", 2, "import sys"),
    ]  # the deleted file's removed line is not an added line


def test_added_lines_fall_back_to_a_scan_when_unidiff_refuses():
    # unidiff rejects a hunk longer than its header says; the scan still sees the '+' line.
    bad = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a\n+API_KEY = 'x'\n+extra\n"
    assert [a.text for a in added_lines(bad)][:1] == ["API_KEY = 'x'"]


def test_crlf_patch_lines_have_no_carriage_return():
    crlf = PATCH.replace("\n", "\r\n")
    assert all("\r" not in a.text for a in added_lines(crlf))


def test_suppressions_found_by_marker():
    found = find_suppressions(added_lines(PATCH))
    assert [(f["path"], f["line"], f["marker"]) for f in found] == [
        ("pkg/mod.py", 2, "noqa"), ("pkg/new.py", 1, "ruff: noqa")]


@pytest.mark.parametrize("text,marker", [
    ("import os  # NOQA", "noqa"),
    ("# ruff: disable[F401]", "ruff: noqa"),
    ("# flake8: noqa", "flake8: noqa"),
    ("x = eval(s)  # nosec", "nosec"),
    ("x = 1  # pylint: disable=invalid-name", "pylint: disable"),
    ("if a:  # pragma: no mutate", "pragma: no mutate"),
    ("def f():  # pragma: no cover", "pragma: no cover"),
    ("[tool.ruff.lint]", "linter config"),
])
def test_each_suppression_kind(text, marker):
    assert [f["marker"] for f in find_suppressions([line(text)])] == [marker]


def test_ruff_config_file_lines_are_linter_config():
    found = find_suppressions([line("select = []", path="ruff.toml")])
    assert [f["marker"] for f in found] == ["linter config"]


@pytest.mark.parametrize("text", [
    "knoqa = 1", "# this is not a suppression", "noqa_count = 3", "nosecure = True",
])
def test_no_false_suppressions(text):
    assert find_suppressions([line(text)]) == []


@pytest.mark.parametrize("text,kind", [
    ('AWS_KEY = "AKIAIOSFODNN7EXAMPLE"', "AWS Access Key"),
    ("-----BEGIN RSA PRIVATE KEY-----", "Private Key"),
    ('token = "ghp_1234567890abcdefghijABCDEFGHIJ123456"', "GitHub Token"),
    ('url = "https://admin:s3cr3tPassw0rd@db.internal/x"', "Basic Auth Credentials"),
    ('x = "xoxb-123456789012-1234567890123-abcdefABCDEF123456"', "Slack Token"),
    ('client = Client("sk-proj-abcDEF1234567890abcdefGHIJ1234567890")', "API key (sk-...)"),
    ('key = "AIzaSyA1234567890abcdefghijklmnopqrstuv"', "Google API key"),
    ('KEY = "sk-0123456789abcdef0123456789abcdef"', "API key (sk-...)"),  # lower-case hex
    ('SECRET_KEY = "a8Fk2LmQ9zXw4RtYp3"', "High-entropy value assigned to a secret name"),
    ('config["db_password"] = "Xk29sLq0pW8zVb7n"',
     "High-entropy value assigned to a secret name"),
    ('{"api_key": "Zt7Qw2Lp9Xk4Mv8Rb1"}', "High-entropy value assigned to a secret name"),
])
def test_secrets_detected(text, kind):
    found = find_secrets([line(text, n=7)])
    assert kind in [f["type"] for f in found]
    assert all(f["path"] == "pkg/a.py" and f["line"] == 7 for f in found)


@pytest.mark.parametrize("text", [
    'password = "hunter2"',                     # short: not high entropy
    'token = os.environ["API_TOKEN"]',          # read from the environment
    'api_key = "your-api-key-here"',            # placeholder, no digits
    'sha = "0123456789abcdef0123456789abcdef"',  # a hash, not under a secret name
    'token_type = "bearer_token_v2"',            # low entropy
    'secret_arn = f"arn:aws:{region}:{account}:secret:x1y2z3"',  # a template
    'TOKEN_RE = re.compile(r"[A-Za-z0-9]{20}")',  # not an assignment of a literal secret
    "def get_password(user):",
    # false positives a red-team pass found on honest code (each a hard gate blocker):
    'token_url = "https://oauth2.googleapis.com/token2"',
    'api_key_header = "X-Api-Key-Version2"',
    'csrf_token_field = "csrfmiddlewaretoken1"',
    'credentials_path = "config/creds_v2.json"',
    'TOKEN_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"',
    'EXAMPLE = "sk-learn-compatible-estimator-wrapper-class-name"',
    'NOTE = "sk-learn-v2-compatible-estimator-wrapper-class-name"',
])
def test_no_false_secrets(text):
    assert find_secrets([line(text)]) == []


def test_findings_never_contain_the_secret():
    secret = "a8Fk2LmQ9zXw4RtYp3"
    found = find_secrets([line(f'SECRET_KEY = "{secret}"')])
    assert found and all(secret not in str(f) for f in found)
    assert found[0]["preview"] == "a8…"


def test_entropy_values():
    assert shannon_entropy("") == 0.0
    assert shannon_entropy("aaaa") == 0.0
    assert shannon_entropy("ab") == pytest.approx(1.0)
    assert shannon_entropy("abcd") == pytest.approx(2.0)
