"""Integrity phase: header parsing, path normalisation, forbidden rules, git cross-check.

Patches are written inline in the exact forms ``git diff`` (``--binary``, ``-M``, ``-C
--find-copies-harder``) produces. Fast, no Docker; one group of tests runs ``git``.
"""

from __future__ import annotations

import os
import unicodedata

import pytest

from proctor.harness.integrity import ForbiddenRules, IntegrityVerdict, check_integrity
from proctor.patch import (
    PatchSummary,
    PatchUnparseable,
    PathRejected,
    TouchedPath,
    git_listed_paths,
    normalise_path,
    parse_patch,
)

HIDDEN = "tests/test_hidden.py"
RULES = ForbiddenRules.for_task(hidden_paths=[HIDDEN])


def verdict(text: str, git_paths: set[str] | None = None, rules=RULES) -> IntegrityVerdict:
    return check_integrity(text, rules, git_paths)[1]


def ok(*paths: str) -> IntegrityVerdict:
    return IntegrityVerdict(violated=False, reasons=(), paths=tuple(sorted(paths)))


def bad(paths: tuple[str, ...], *reasons: str) -> IntegrityVerdict:
    return IntegrityVerdict(violated=True, reasons=reasons, paths=tuple(sorted(paths)))


def edit(path: str, old: str = "a = 1", new: str = "a = 2") -> str:
    return (
        f"diff --git a/{path} b/{path}\nindex 1111111..2222222 100644\n"
        f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-{old}\n+{new}\n"
    )


def new_file(path: str, body: str = "x = 1") -> str:
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..3333333\n"
        f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+{body}\n"
    )


def empty_new_file(path: str) -> str:
    return f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..e69de29\n"


CONFTEST = "conftest.py at any depth"
CONFIG = "pytest/tox/setup configuration"

# --- allowed patches ---------------------------------------------------------------------


def test_plain_edit_allowed():
    assert verdict(edit("pkg/mod.py")) == ok("pkg/mod.py")


def test_new_file_allowed():
    assert verdict(new_file("pkg/new.py")) == ok("pkg/new.py")


def test_deletion_allowed():
    text = (
        "diff --git a/pkg/old.py b/pkg/old.py\ndeleted file mode 100644\n"
        "index 7d4290a..0000000\n--- a/pkg/old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x = 1\n"
    )
    summary, v = check_integrity(text, RULES)
    assert v == ok("pkg/old.py")
    assert summary.touched == (TouchedPath("pkg/old.py", "deleted"),)
    assert (summary.added_lines, summary.removed_lines) == (0, 1)


def test_empty_new_file_allowed_but_not_as_conftest():
    assert verdict(empty_new_file("pkg/__init__.py")) == ok("pkg/__init__.py")
    assert verdict(empty_new_file("pkg/conftest.py")) == bad(
        ("pkg/conftest.py",), f"pkg/conftest.py: {CONFTEST}"
    )


def test_honest_patch_mentioning_forbidden_names_in_content_is_allowed():
    # Comments, strings, and removed/added lines that *look like* headers: all hunk content.
    text = (
        "diff --git a/pkg/mod.py b/pkg/mod.py\n--- a/pkg/mod.py\n+++ b/pkg/mod.py\n"
        "@@ -1,3 +1,5 @@\n"
        " # see conftest.py\n"
        "--- a/tests/conftest.py\n"
        "+++ b/tests/conftest.py\n"
        f"+HIDDEN = '{HIDDEN}'  # not touched: pytest.ini, .git/config\n"
        "+diff --git a/setup.cfg b/setup.cfg\n"
        " x = 1\n"
    )
    summary, v = check_integrity(text, RULES)
    assert v == ok("pkg/mod.py")
    assert summary.added_line_numbers == {"pkg/mod.py": [2, 3, 4]}


def test_empty_text_gives_empty_summary():
    assert parse_patch("") == PatchSummary()
    assert parse_patch("  \n\t\n") == PatchSummary()
    assert verdict("\n") == ok()


# --- renames, copies, modes, binaries, symlinks -------------------------------------------


def test_rename_onto_conftest_is_violation():
    text = (
        "diff --git a/tests/helpers.py b/tests/conftest.py\nsimilarity index 100%\n"
        "rename from tests/helpers.py\nrename to tests/conftest.py\n"
    )
    summary, v = check_integrity(text, RULES)
    assert v == bad(("tests/conftest.py", "tests/helpers.py"), f"tests/conftest.py: {CONFTEST}")
    assert summary.touched == (
        TouchedPath("tests/conftest.py", "rename_to"),
        TouchedPath("tests/helpers.py", "rename_from"),
    )


def test_rename_from_hidden_path_is_violation():
    text = (
        f"diff --git a/{HIDDEN} b/pkg/moved.py\nsimilarity index 100%\n"
        f"rename from {HIDDEN}\nrename to pkg/moved.py\n"
    )
    assert verdict(text) == bad(("pkg/moved.py", HIDDEN), f"{HIDDEN}: hidden test file")


def test_copy_to_forbidden_is_violation():
    text = (
        "diff --git a/pkg/big.py b/pkg/sitecustomize.py\nsimilarity index 100%\n"
        "copy from pkg/big.py\ncopy to pkg/sitecustomize.py\n"
    )
    summary, v = check_integrity(text, RULES)
    assert v == bad(
        ("pkg/big.py", "pkg/sitecustomize.py"), "pkg/sitecustomize.py: interpreter start-up hook"
    )
    assert {t.kind for t in summary.touched} == {"copy_from", "copy_to"}


def test_mode_only_change_on_setup_cfg_is_violation():
    text = "diff --git a/setup.cfg b/setup.cfg\nold mode 100644\nnew mode 100755\n"
    summary, v = check_integrity(text, RULES)
    assert v == bad(("setup.cfg",), f"setup.cfg: {CONFIG}")
    assert TouchedPath("setup.cfg", "mode_change") in summary.touched


def test_mode_only_change_on_ordinary_file_allowed():
    text = "diff --git a/bin/run.py b/bin/run.py\nold mode 100644\nnew mode 100755\n"
    assert verdict(text) == ok("bin/run.py")


def test_git_binary_patch_is_violation():
    text = (
        "diff --git a/data/blob.dat b/data/blob.dat\nnew file mode 100644\n"
        "index 0000000000000000000000000000000000000000..8352675d67aed6625ece79af41c27fdb4ee2e867\n"
        "GIT binary patch\nliteral 3\nKcmZQzWC8#H2LJ>B\n\nliteral 0\nHcmV?d00001\n\n"
    )
    assert verdict(text) == bad(("data/blob.dat",), "data/blob.dat: binary patch")


def test_binary_files_differ_is_violation():
    text = (
        "diff --git a/my bin.dat b/my bin.dat\nindex bdc955b..8835708 100644\n"
        "Binary files a/my bin.dat and b/my bin.dat differ\n"
    )
    assert verdict(text) == bad(("my bin.dat",), "my bin.dat: binary patch")


def test_new_symlink_is_violation():
    text = (
        "diff --git a/link b/link\nnew file mode 120000\nindex 0000000..afe0daa\n"
        "--- /dev/null\n+++ b/link\n@@ -0,0 +1 @@\n+pkg/a.py\n\\ No newline at end of file\n"
    )
    assert verdict(text) == bad(("link",), "link: symlink (mode 120000)")


def test_modified_symlink_seen_on_index_line_is_violation():
    text = (
        "diff --git a/link b/link\nindex 67edec0..d90d485 120000\n--- a/link\n+++ b/link\n"
        "@@ -1 +1 @@\n-t.py\n\\ No newline at end of file\n+other.py\n"
        "\\ No newline at end of file\n"
    )
    assert verdict(text) == bad(("link",), "link: symlink (mode 120000)")


def test_submodule_is_violation():
    text = (
        "diff --git a/vendor/lib b/vendor/lib\nnew file mode 160000\nindex 0000000..1234567\n"
        "--- /dev/null\n+++ b/vendor/lib\n@@ -0,0 +1 @@\n+Subproject commit 1234567\n"
    )
    assert verdict(text) == bad(("vendor/lib",), "vendor/lib: submodule (mode 160000)")


# --- quoting, CRLF, header disagreement ----------------------------------------------------


def test_c_quoted_octal_escape_onto_conftest_is_violation():
    text = (
        'diff --git "a/tests/con\\146test.py" "b/tests/con\\146test.py"\n'
        "new file mode 100644\nindex 0000000..b680253\n"
        '--- /dev/null\n+++ "b/tests/con\\146test.py"\n@@ -0,0 +1 @@\n+x = 1\n'
    )
    assert verdict(text) == bad(("tests/conftest.py",), f"tests/conftest.py: {CONFTEST}")


def test_non_ascii_quote_and_space_paths_allowed_and_decoded():
    text = (
        'diff --git "a/pkg/t\\303\\251st.py" "b/pkg/t\\303\\251st.py"\n'
        "new file mode 100644\nindex 0000000..b680253\n"
        '--- /dev/null\n+++ "b/pkg/t\\303\\251st.py"\n@@ -0,0 +1 @@\n+z\n'
        'diff --git "a/pkg/qu\\"ote.py" "b/pkg/qu\\"ote.py"\n'
        "new file mode 100644\nindex 0000000..9745a83\n"
        '--- /dev/null\n+++ "b/pkg/qu\\"ote.py"\n@@ -0,0 +1 @@\n+q"\n'
        "diff --git a/pkg/wi th.py b/pkg/wi th.py\nnew file mode 100644\nindex 0000000..b680253\n"
        "--- /dev/null\n+++ b/pkg/wi th.py\t\n@@ -0,0 +1 @@\n+z\n"
    )
    assert verdict(text) == ok("pkg/tést.py", 'pkg/qu"ote.py', "pkg/wi th.py")


def test_crlf_patch_editing_conftest_is_violation():
    text = edit("tests/conftest.py").replace("\n", "\r\n")
    assert verdict(text) == bad(("tests/conftest.py",), f"tests/conftest.py: {CONFTEST}")


def test_crlf_honest_patch_allowed():
    text = edit("pkg/mod.py").replace("\n", "\r\n")
    summary, v = check_integrity(text, RULES)
    assert v == ok("pkg/mod.py")
    assert summary.added_line_numbers == {"pkg/mod.py": [1]}


def test_dash_lines_naming_other_paths_than_diff_git_line_are_seen():
    text = (
        "diff --git a/ok.py b/ok.py\n--- a/tests/conftest.py\n+++ b/tests/conftest.py\n"
        "@@ -1 +1 @@\n-a\n+b\n"
    )
    assert verdict(text) == bad(("ok.py", "tests/conftest.py"), f"tests/conftest.py: {CONFTEST}")


def test_traditional_diff_without_git_header_is_read():
    text = (
        "--- a/pkg/conftest.py\t2024-01-01\n+++ b/pkg/conftest.py\t2024-01-01\n"
        "@@ -1 +1 @@\n-a\n+b\n"
    )
    assert verdict(text) == bad(("pkg/conftest.py",), f"pkg/conftest.py: {CONFTEST}")


# --- normalisation -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "a/tests//test_hidden.py",
        "b/./tests/./test_hidden.py",
        "tests/test_hidden.py",
        "a/Tests/TEST_HIDDEN.py",
    ],
)
def test_odd_spellings_normalise_onto_the_hidden_path(raw):
    rules_path = normalise_path(raw, strip_prefix=raw.startswith(("a/", "b/")))
    assert RULES.match(rules_path) == "hidden test file"


def test_double_slash_and_dot_segments_in_patch_hit_hidden_path():
    text = edit("tests//test_hidden.py") + edit("./tests/./test_hidden.py")
    assert verdict(text) == bad((HIDDEN,), f"{HIDDEN}: hidden test file")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a/pkg/mod.py", "pkg/mod.py"),
        ("b/a/b.py", "a/b.py"),  # only one prefix goes
        ("pkg/mod.py\r", "pkg/mod.py"),
        ('"a/t\\303\\251st.py"', "tést.py"),
        ('"a/with space\\"quote\\\\x\\ty"', 'with space"quote\\x\ty'),
        (unicodedata.normalize("NFD", "a/tést.py"), "tést.py"),
        ("a/x//y/./z.py", "x/y/z.py"),
    ],
)
def test_normalise_path(raw, expected):
    assert normalise_path(raw) == expected


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("a/../etc/passwd", "'..' escapes the repository"),
        ("/etc/passwd", "absolute path"),
        ("a//etc/passwd", "absolute path"),
        ("a/.git/hooks/pre-commit", "path inside .git/"),
        ("a/sub/.GIT/config", "path inside .git/"),
        ("", "empty path"),
        ("a/./", "empty path"),
    ],
)
def test_normalise_path_rejects(raw, why):
    with pytest.raises(PathRejected) as exc:
        normalise_path(raw)
    assert exc.value.why == why


def test_parent_and_absolute_paths_are_violations_not_exceptions():
    text = edit("../etc/passwd") + edit("/etc/shadow")
    assert verdict(text) == bad(
        ("../etc/passwd", "/etc/shadow"),
        "../etc/passwd: '..' escapes the repository",
        "/etc/shadow: absolute path",
    )


def test_git_hook_is_violation():
    text = (
        "diff --git a/.git/hooks/pre-commit b/.git/hooks/pre-commit\nnew file mode 100755\n"
        "--- /dev/null\n+++ b/.git/hooks/pre-commit\n@@ -0,0 +1 @@\n+exit 0\n"
    )
    assert verdict(text) == bad(
        (".git/hooks/pre-commit",), ".git/hooks/pre-commit: path inside .git/"
    )


def test_case_folded_conftest_is_violation():
    text = new_file("Conftest.PY") + new_file("Tests/CONFTEST.py")
    assert verdict(text) == bad(
        ("Conftest.PY", "Tests/CONFTEST.py"),
        f"Conftest.PY: {CONFTEST}",
        f"Tests/CONFTEST.py: {CONFTEST}",
    )


def test_no_prefix_patch_is_read_as_written_and_as_git_reads_it():
    text = "diff --git src/re.py src/re.py\n--- src/re.py\n+++ src/re.py\n@@ -1 +1 @@\n-a\n+b\n"
    shadow = "new top-level module 're' shadows the standard library or test tooling"
    # git -p1 would write re.py at the top level: that is what it shadows.
    assert verdict(text, git_paths={"re.py"}) == bad(("re.py", "src/re.py"), f"re.py: {shadow}")


# --- forbidden rules -----------------------------------------------------------------------


def test_shadowing_top_level_modules():
    shadow = "shadows the standard library or test tooling"
    text = new_file("pytest.py") + new_file("_pytest/x.py") + new_file("unittest/__init__.py")
    text += new_file("mypkg/pytest_helpers.py") + new_file("pkg/json.py")
    assert verdict(text) == bad(
        (
            "_pytest/x.py",
            "mypkg/pytest_helpers.py",
            "pkg/json.py",
            "pytest.py",
            "unittest/__init__.py",
        ),
        f"_pytest/x.py: new top-level module '_pytest' {shadow}",
        f"pytest.py: new top-level module 'pytest' {shadow}",
        f"unittest/__init__.py: new top-level module 'unittest' {shadow}",
    )


def test_existing_top_level_module_is_not_new():
    rules = ForbiddenRules.for_task(existing_top_level=["types.py", "html"])
    assert verdict(edit("types.py") + new_file("html/page.py"), rules=rules) == ok(
        "html/page.py", "types.py"
    )
    assert rules.match("site/__init__.py") is not None
    assert rules.match("site/index.html") is None  # not a module


def test_pth_file_is_violation():
    text = new_file("pkg/evil.pth", "import os")
    assert verdict(text) == bad(
        ("pkg/evil.pth",),
        "pkg/evil.pth: path configuration file (*.pth) runs at interpreter start-up",
    )


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("pytest.ini", CONFIG),
        ("sub/tox.ini", CONFIG),
        ("sub/pyproject.toml", "pyproject.toml (test, tool and build configuration)"),
        ("pkg/usercustomize.py", "interpreter start-up hook"),
        ("pkg/mod.cpython-311-x86_64-linux-gnu.so", "native binary"),
        ("pkg/__pycache__/m.cpython-311.pyc", "compiled Python file"),
        ("pkg/.gitattributes", "git metadata (.git* file or directory)"),
        (".gitignore", "git metadata (.git* file or directory)"),
        (".github/workflows/ci.yml", "verifier or CI directory"),
        ("ci/run.sh", "verifier or CI directory"),
        ("verifier/check.py", "verifier or CI directory"),
        (".proctor/state", "verifier or CI directory"),
        ("docs/secret/a/b.md", "forbidden by the task (docs/secret/**)"),
        ("pkg/ci/x.py", None),  # CI dirs count at the top level only
        ("docs/public.md", None),
        ("pkg/conftest_utils.py", None),
    ],
)
def test_forbidden_rules(path, reason):
    rules = ForbiddenRules.for_task(extra=["./docs/secret/**"], hidden_paths=[HIDDEN])
    assert rules.match(path) == reason


# --- unparseable ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "hello world\nthis is not a patch\n",
        "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,5 +1 @@\n-a\n+b\n",  # short
        "--- a/x.py\n+++ b/x.py\n@@ -1,x +1 @@\n-a\n+b\n",  # malformed hunk header
        "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n+c\n@@ -9 +9 @@\n",  # miscounted
        'diff --git "a/x.py "b/x.py"\n',  # broken quoting
    ],
)
def test_garbage_is_unparseable(text):
    with pytest.raises(PatchUnparseable):
        parse_patch(text)


# --- added lines ---------------------------------------------------------------------------


def test_added_line_numbers_per_python_file():
    text = (
        (
            "diff --git a/pkg/a.py b/pkg/a.py\n--- a/pkg/a.py\n+++ b/pkg/a.py\n"
            "@@ -1,4 +1,5 @@\n x\n-y\n+Y\n+Z\n z\n w\n"
            "@@ -10,2 +11,3 @@\n k\n+new\n l\n"
        )
        + new_file("docs/readme.md")
        + new_file("pkg/b.py")
    )
    summary = parse_patch(text)
    assert summary.added_line_numbers == {"pkg/a.py": [2, 3, 12], "pkg/b.py": [1]}
    assert (summary.added_lines, summary.removed_lines) == (5, 1)


# --- git cross-check -----------------------------------------------------------------------


def test_path_git_lists_but_parser_missed_is_violation():
    assert verdict(edit("pkg/mod.py"), git_paths={"pkg/mod.py", "tests/sneaky.py"}) == bad(
        ("pkg/mod.py", "tests/sneaky.py"), "git touches tests/sneaky.py which the parser missed"
    )


def test_git_paths_compare_normalised_and_case_folded():
    assert verdict(edit("pkg/Mod.py"), git_paths={"./pkg//mod.py"}) == ok("pkg/Mod.py")


def test_git_path_outside_repo_is_violation():
    assert verdict(edit("pkg/mod.py"), git_paths={"pkg/mod.py", "../x"}) == bad(
        ("../x", "pkg/mod.py"), "../x: '..' escapes the repository"
    )


REAL_PATCH = (
    "diff --git a/pkg/a.py b/pkg/a.py\ndeleted file mode 100644\nindex 7d4290a..0000000\n"
    "--- a/pkg/a.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x = 1\n"
    "diff --git a/pkg/big.py b/pkg/big2.py\nsimilarity index 100%\n"
    "copy from pkg/big.py\ncopy to pkg/big2.py\n"
    'diff --git "a/pkg/t\\303\\251st.py" "b/pkg/t\\303\\251st.py"\n'
    "new file mode 100644\nindex 0000000..b680253\n"
    '--- /dev/null\n+++ "b/pkg/t\\303\\251st.py"\n@@ -0,0 +1 @@\n+z\n'
    "diff --git a/pkg/wi th.py b/pkg/wi th.py\nnew file mode 100644\nindex 0000000..b680253\n"
    "--- /dev/null\n+++ b/pkg/wi th.py\t\n@@ -0,0 +1 @@\n+z\n"
    "diff --git a/bin/run b/bin/run\nold mode 100644\nnew mode 100755\n"
    "diff --git a/tests/t.py b/tests/t2.py\nsimilarity index 100%\n"
    "rename from tests/t.py\nrename to tests/t2.py\n"
    "diff --git a/docs/old.md b/notes.md\nsimilarity index 100%\n"
    "rename from docs/old.md\nrename to notes.md\n"
)


def test_git_listed_paths_on_real_patch():
    assert git_listed_paths(REAL_PATCH.encode()) == {
        "pkg/a.py",
        "pkg/big.py",
        "pkg/big2.py",
        "pkg/tést.py",
        "pkg/wi th.py",
        "bin/run",
        "tests/t.py",
        "tests/t2.py",
        "docs/old.md",
        "notes.md",
    }


def test_git_and_parser_agree_on_honest_real_patch():
    git_paths = git_listed_paths(REAL_PATCH.encode())
    assert verdict(REAL_PATCH, git_paths=git_paths).violated is False


def test_git_lists_dotdot_and_dot_git_paths_for_us_to_reject():
    text = edit("../etc/passwd") + edit(".git/config")
    git_paths = git_listed_paths(text.encode())
    assert git_paths == {"../etc/passwd", ".git/config"}
    assert verdict(text, git_paths=git_paths) == bad(
        ("../etc/passwd", ".git/config"),
        "../etc/passwd: '..' escapes the repository",
        ".git/config: path inside .git/",
    )


def test_git_listed_paths_rejects_garbage_and_cleans_up(monkeypatch):
    from proctor.sandbox import ownership

    made: list = []
    real = ownership.claim_dir

    def spy(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(ownership, "claim_dir", spy)
    with pytest.raises(PatchUnparseable, match="git apply rejects"):
        git_listed_paths(b"not a patch\n")
    assert git_listed_paths(edit("pkg/mod.py").encode()) == {"pkg/mod.py"}
    assert len(made) == 2 and not any(os.path.exists(d) for d in made)
    assert git_listed_paths(b"  \n") == set()
