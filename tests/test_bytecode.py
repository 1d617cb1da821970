"""The task's compiled pristine files (proctor/suites/bytecode.py): built once per task and
image in a sandbox of the pristine repository, shown read-only in every later sandbox of
the task. A module the patch changed runs from its source, an untouched one from the tree;
the hidden tests are never in it; the same patch gets the same record with and without it.
The builder's bad inputs (a tar with links or escaping paths, a failed build, a repository
too small to be worth a build) leave the runs compiling from source."""

from __future__ import annotations

import io
import marshal
import os
import re
import stat
import tarfile
import types

import pytest

from proctor import load_task, score
from proctor.harness.pipeline import suites_in_sandbox
from proctor.harness.pipeline.suites_in_sandbox import task_bytecode
from proctor.sandbox import MUTATION_DIR, PYTHON, SandboxSpec, docker_client, resolve_image
from proctor.suites import BYTECODE_ENV, BYTECODE_MOUNT, MUTATION_BYTECODE_MOUNT, store_bytecode
from proctor.suites.bytecode import pyc_files
from proctor.suites.pytest_runner import RUNNER_FLAGS
from tests.redteam import mini_task


@pytest.fixture(scope="module")
def tree(toolz_task, docker_ready):
    """(task, image tag, mounts) of the toolz example, its tree built."""
    task = load_task(toolz_task)
    tag, image_id = resolve_image(docker_client(), docker_ready)
    mounts = task_bytecode(task, tag, image_id)
    assert [inside for inside, _ in mounts] == [BYTECODE_MOUNT, MUTATION_BYTECODE_MOUNT]
    assert len({host for _, host in mounts}) == 1
    return task, tag, mounts


@pytest.mark.docker
def test_an_untouched_module_loads_from_the_tree_and_a_patched_one_from_its_source(tree):
    task, tag, mounts = tree
    patch = (task.root / "reference.patch").read_bytes()  # changes toolz/itertoolz.py
    sb, applied = suites_in_sandbox.open_patched_sandbox(task, SandboxSpec(tag, mounts=mounts),
                                                         patch)
    with sb:
        assert applied.applied
        code = "import sys; sys.path.insert(0, '/work/repo'); import toolz"
        res = sb.run(["sh", "-c", f"{PYTHON} {' '.join(RUNNER_FLAGS)} -v -c \"{code}\" 2>&1"],
                     timeout=60, cwd="/work/repo")
        assert res.ok, res.output[-2000:]
        assert (f"# {BYTECODE_MOUNT}/toolz/dicttoolz.cpython-311.pyc matches "
                "/work/repo/toolz/dicttoolz.py") in res.output
        # the tree has itertoolz too, compiled from its pristine source: its hash differs
        assert os.path.isfile(os.path.join(mounts[0][1], "toolz/itertoolz.cpython-311.pyc"))
        assert "# code object from /work/repo/toolz/itertoolz.py" in res.output
        # the sandbox user can neither change nor add a file of the tree
        res = sb.run(["sh", "-c", f"touch {BYTECODE_MOUNT}/x; "
                      f"echo forged > {BYTECODE_MOUNT}/toolz/dicttoolz.cpython-311.pyc"],
                     timeout=10)
        assert not res.ok and res.output.count("Read-only file system") == 2, res.output
        # the mutation step's copy (made as root, as the step makes it) loads from it too
        res = sb.run(["sh", "-c", f"mkdir {MUTATION_DIR} && cp -R /work/repo {MUTATION_DIR}/"],
                     timeout=30, cwd="/", user="0:0")
        assert res.ok, res.output
        code = f"import sys; sys.path.insert(0, '{MUTATION_DIR}/repo'); import toolz"
        res = sb.run(["sh", "-c", f"{PYTHON} {' '.join(RUNNER_FLAGS)} -v -c \"{code}\" 2>&1"],
                     timeout=60, cwd=f"{MUTATION_DIR}/repo")
        assert (f"# {MUTATION_BYTECODE_MOUNT}/toolz/dicttoolz.cpython-311.pyc matches "
                f"{MUTATION_DIR}/repo/toolz/dicttoolz.py") in res.output, res.output[-2000:]
        assert f"# code object from {MUTATION_DIR}/repo/toolz/itertoolz.py" in res.output


@pytest.mark.docker
def test_the_tree_holds_compiled_repository_files_only_never_a_hidden_test(tree):
    task, _, mounts = tree
    root = mounts[0][1]
    files = [os.path.relpath(os.path.join(d, f), root)
             for d, _, names in os.walk(root) for f in names]
    assert files and all(f.endswith(".pyc") for f in files)
    sources = {str(p.relative_to(task.repo)).removesuffix(".py")
               for p in task.repo.rglob("*.py")}
    assert {f.split(".cpython-")[0] for f in files} <= sources
    # no test function that only the hidden tests define is anywhere in the tree's bytes
    defined = re.compile(rb"def (test_\w+)")
    visible = {m for p in task.repo.rglob("*.py") for m in defined.findall(p.read_bytes())}
    hidden_only = {m for p in task.hidden.rglob("*.py")
                   for m in defined.findall(p.read_bytes())} - visible
    assert hidden_only
    names: set[bytes] = set()
    for f in files:
        with open(os.path.join(root, f), "rb") as fh:
            _names_of(marshal.loads(fh.read()[16:]), names)
    assert sorted(hidden_only & names) == []
    # pytest's rewrite of a public test module, the import system's bytecode of the package
    assert any(f.startswith("toolz/tests/test_dicttoolz.cpython-311-pytest-") for f in files)
    assert "toolz/dicttoolz.cpython-311.pyc" in files
    assert all(stat.S_IMODE(os.stat(os.path.join(root, f)).st_mode) == 0o444 for f in files)


def _names_of(code: types.CodeType, into: set[bytes]) -> None:
    """Every name and string constant of ``code`` and of the code objects inside it."""
    into.update(n.encode() for n in (code.co_name, *code.co_names, *code.co_varnames))
    for const in code.co_consts:
        if isinstance(const, str):
            into.add(const.encode())
        elif isinstance(const, types.CodeType):
            _names_of(const, into)


@pytest.mark.docker
@pytest.mark.parametrize("name", ["reference", "partial"])
def test_a_patch_gets_the_same_record_with_and_without_the_tree(name, tree, toolz_patches,
                                                                monkeypatch):
    task = tree[0]
    with_tree = score(task, toolz_patches[name], rollout_id=name)
    monkeypatch.setenv(BYTECODE_ENV, "0")
    without = score(task, toolz_patches[name], rollout_id=name)
    assert with_tree.status == without.status == "scored", (with_tree.error, without.error)
    for field in ("reward", "components", "penalties", "flags", "integrity", "tests"):
        assert getattr(with_tree, field) == getattr(without, field), field


def _tar(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buf.getvalue()


def test_only_regular_pyc_files_inside_the_tree_are_taken_from_the_archive():
    link = tarfile.TarInfo("./a/link.pyc")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    archive = _tar([(tarfile.TarInfo("./a/m.cpython-311.pyc"), b"pyc"),
                    (tarfile.TarInfo("./a/m.py"), b"source"),
                    (tarfile.TarInfo("../escape.pyc"), b"x"),
                    (tarfile.TarInfo("/abs.pyc"), b"x"),
                    (link, b"")])
    assert pyc_files(archive) == {"a/m.cpython-311.pyc": b"pyc"}
    assert pyc_files(b"not a tar") is None
    assert pyc_files(_tar([(tarfile.TarInfo("./m.py"), b"source")])) is None


def test_a_stored_tree_is_read_only_and_written_once(tmp_path, monkeypatch):
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path))
    where = store_bytecode("k1", {"a/m.cpython-311.pyc": b"one"})
    assert (where / "a/m.cpython-311.pyc").read_bytes() == b"one"
    assert stat.S_IMODE((where / "a").stat().st_mode) == 0o555
    assert stat.S_IMODE((where / "a/m.cpython-311.pyc").stat().st_mode) == 0o444
    assert store_bytecode("k1", {"a/m.cpython-311.pyc": b"two"}) == where
    assert (where / "a/m.cpython-311.pyc").read_bytes() == b"one"
    assert [p.name for p in tmp_path.joinpath("bytecode").iterdir()] == ["k1"]  # no leftovers


def test_a_small_repository_gets_no_tree_and_no_sandbox(tmp_path, monkeypatch, toolz_make_task):
    task = load_task(mini_task.build(tmp_path / "mini", toolz_make_task.make_patch))

    def no_sandbox(*args, **kwargs):
        raise AssertionError("a sandbox was opened")

    monkeypatch.setattr(suites_in_sandbox, "open_task_sandbox", no_sandbox)
    assert task_bytecode(task, "image", "sha256:0") == ()


def test_a_failed_build_leaves_no_tree_and_is_not_tried_again(toolz_task, tmp_path,
                                                               monkeypatch):
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path))
    task = load_task(toolz_task)
    opened = []

    class Failing:
        def __enter__(self):
            opened.append(1)
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(suites_in_sandbox, "docker_can_bind", lambda: True)
    monkeypatch.setattr(suites_in_sandbox, "open_task_sandbox", lambda *a, **k: Failing())
    monkeypatch.setattr(suites_in_sandbox, "restore_public_tests", lambda *a, **k: None)
    monkeypatch.setattr(suites_in_sandbox, "build_bytecode", lambda *a, **k: None)
    assert task_bytecode(task, "image", "sha256:failing") == ()
    assert task_bytecode(task, "image", "sha256:failing") == ()
    assert opened == [1]
    assert [p.suffix for p in (tmp_path / "bytecode").iterdir()] == [".lock"]  # no tree
    monkeypatch.setenv(BYTECODE_ENV, "0")
    assert task_bytecode(task, "image", "sha256:other") == ()
    assert opened == [1]


def test_with_upstream_placement_no_compiled_file_of_a_hidden_path_is_kept(tmp_path,
                                                                         monkeypatch):
    """Upstream placement puts a hidden file at its repository path: it must compile from
    its own source, so the tree holds nothing at a path the hidden directory names."""
    from tests import test_hidden_upstream_path as upstream

    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(suites_in_sandbox, "BYTECODE_MIN_SOURCE", 0)
    monkeypatch.setattr(suites_in_sandbox, "docker_can_bind", lambda: True)
    task = load_task(upstream.build(tmp_path / "task"))
    hidden = sorted(str(p.relative_to(task.hidden)) for p in task.hidden.rglob("*.py"))
    assert hidden == ["tests/helper.py", "tests/test_hidden.py"]
    built = {"calc/core.cpython-311.pyc": b"kept",
             "tests/test_public.cpython-311-pytest-9.0.3.pyc": b"kept",
             **{h.removesuffix(".py") + ".cpython-311-pytest-9.0.3.pyc": b"dropped"
                for h in hidden},
             **{h.removesuffix(".py") + ".cpython-311.pyc": b"dropped" for h in hidden}}

    class Sandbox:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(suites_in_sandbox, "open_task_sandbox", lambda *a, **k: Sandbox())
    monkeypatch.setattr(suites_in_sandbox, "restore_public_tests", lambda *a, **k: None)
    monkeypatch.setattr(suites_in_sandbox, "build_bytecode", lambda *a, **k: dict(built))
    ((inside, root), (again, same)) = task_bytecode(task, "image", "sha256:upstream")
    assert (inside, again, same) == (BYTECODE_MOUNT, MUTATION_BYTECODE_MOUNT, root)
    files = sorted(os.path.relpath(os.path.join(d, f), root)
                   for d, _, names in os.walk(root) for f in names)
    assert files == ["calc/core.cpython-311.pyc",
                     "tests/test_public.cpython-311-pytest-9.0.3.pyc"]


@pytest.mark.docker
def test_what_compiles_with_a_warning_stays_out_and_pytest_reads_the_rest(
        tmp_path, monkeypatch, docker_ready, toolz_make_task):
    """Loading bytecode skips the compile and its warnings, so whatever compiles with one
    (an invalid escape in a module, an always-true assert in a test module) is not in the
    tree. pytest takes its cached rewrite of an untouched public test module from the tree
    and rewrites a changed one anew."""
    monkeypatch.setattr(suites_in_sandbox, "BYTECODE_MIN_SOURCE", 0)
    root = mini_task.build(tmp_path / "mini", toolz_make_task.make_patch)
    (root / "repo/calc/warns.py").write_text('PATTERN = "\\d+"\n')
    (root / "repo/tests/test_warns.py").write_text(
        'def test_always_true():\n    assert (1 == 2, "a tuple is true")\n')
    task = load_task(root)
    tag, image_id = resolve_image(docker_client(), docker_ready)
    mounts = task_bytecode(task, tag, image_id)
    tree_root = mounts[0][1]
    files = sorted(os.path.relpath(os.path.join(d, f), tree_root)
                   for d, _, names in os.walk(tree_root) for f in names)
    assert "calc/core.cpython-311.pyc" in files
    assert any(f.startswith("tests/test_core.cpython-311-pytest-") for f in files), files
    assert not [f for f in files if "warns" in f], files
    sb, _ = suites_in_sandbox.open_patched_sandbox(task, SandboxSpec(tag, mounts=mounts), None)
    with sb:
        suites_in_sandbox.restore_public_tests(sb, task)
        collect = (f"{PYTHON} {' '.join(RUNNER_FLAGS)} -m pytest -c /proctor/harness/pytest.ini "
                   "--rootdir=/work/repo -p no:cacheprovider --import-mode=prepend --co -q "
                   "--debug=/tmp/debug.log tests >/dev/null; grep -E 'rewritten pyc|rewriting' "
                   "/tmp/debug.log")
        out = sb.run(["sh", "-c", collect], timeout=60, cwd="/work/repo").output
        assert "found cached rewritten pyc for /work/repo/tests/test_core.py" in out, out
        assert "rewriting PosixPath('/work/repo/tests/test_warns.py')" in out, out
        out = sb.run(["sh", "-c", "echo '# changed' >> tests/test_core.py && " + collect],
                     timeout=60, cwd="/work/repo").output
        assert "rewriting PosixPath('/work/repo/tests/test_core.py')" in out, out
