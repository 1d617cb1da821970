"""The task's pristine Python files compiled once, for every later sandbox of the task.

A sandbox's runners load no bytecode the code under test could have written (``-B`` and
``-X pycache_prefix`` at a read-only tree of the image: :data:`RUNNER_FLAGS`), so each run
compiled the repository's modules and pytest rewrote the asserts of its test modules from
source: on the toolz example about 0.3 s of the public run's ~0.7 s of CPU, in every
sandbox, again in the hidden run. This module compiles them once per task and image, in a
sandbox of the pristine repository laid in as every scored sandbox has it (the same
archive, the pristine public tests put back the same way), and keeps the tree the runners'
``pycache_prefix`` reads for ``/work/repo`` (``<prefix>/work/repo/...``):

- the import system's bytecode of every module under the repository (``compileall``);
- pytest's cached assertion rewrites of the public test modules and conftests, as
  collecting the public suite with the runners' pytest options writes them.

Later sandboxes show that tree read-only at ``<prefix>/work/repo`` and at the mutation
copy's place, ``<prefix>/proctor/mutation/repo`` (bind mounts made at their creation: the
sandbox user cannot write them; the mutation runner asserts plainly, so only the modules'
bytecode serves it there). What it holds stays trusted, and a run gives what it gives
compiling from source:

- It is compiled from the pristine repository only. The hidden tests are never compiled
  into it: they would be readable in the public run's sandbox.
- The modules' bytecode is checked by the source's hash (``checked-hash``): a module the
  patch changed, or that the code under test rewrote, compiles from its source, as before.
  pytest checks its cached rewrites by the source's modification time and size; they are
  of the public test modules and conftests, which the public run puts back pristine (a
  changed one gets a new time from ``git apply`` and is rewritten anew).
- Nothing that compiles with a warning is in it (both steps run with ``-W error``): loading
  bytecode skips the compile, so a warning a conftest turns into an error, or a test that
  records warnings, sees the same as compiling from source.
- Code that changes a test module at run time and sets its size and time back runs the
  pristine test: no patch gains from that.

The key of a tree (:func:`bytecode_key`) is the repository archive's sha256 (file contents
and times), the image id, the public test paths, the files left out, the build command,
the runners' pytest configuration and :data:`FORMAT`. ``PROCTOR_BYTECODE=0`` turns it off
(every run compiles from source, as without this module).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shlex
import shutil
import tarfile
import tempfile
from pathlib import Path

from proctor import cache_dirs
from proctor.sandbox import HARNESS_DIR, MUTATION_DIR, PYCACHE_PREFIX, PYTHON, REPO, Sandbox
from proctor.suites.pytest_runner import INCONTAINER

BYTECODE_ENV = "PROCTOR_BYTECODE"
#: Bump when what the tree holds or how it is made changes (part of the key).
FORMAT = 2
#: Where a sandbox shows the task's tree: the runners' prefix followed by the repo's path.
BYTECODE_MOUNT = f"{PYCACHE_PREFIX}{REPO}"
#: Where it shows it again for the mutation step's copy of the repository.
MUTATION_BYTECODE_MOUNT = f"{PYCACHE_PREFIX}{MUTATION_DIR}/repo"
#: Largest tree taken (bytes of its archive); a larger one is not kept.
MAX_TREE_BYTES = 64 * 1024**2
#: Where the sandbox command leaves the tree's archive.
_OUT = "/tmp/proctor-bytecode.tar"


def bytecode_enabled() -> bool:
    """Whether tasks' trees are built and shown (``$PROCTOR_BYTECODE`` is not ``0``)."""
    return os.environ.get(BYTECODE_ENV, "1") != "0"


def bytecode_key(repo_archive: bytes, image_id: str, public: list[str],
                 left_out: list[str] = (), pythonpath: list[str] = ()) -> str:
    """The key of a tree (hex, 32 characters): see the module docstring. ``left_out``:
    repository paths whose compiled files the tree must not hold; ``pythonpath`` as
    :func:`build_command` takes it (the build command is part of the key)."""
    h = hashlib.sha256(json.dumps([FORMAT, image_id, sorted(public), sorted(left_out),
                                   build_command(public, pythonpath)]).encode())
    h.update(hashlib.sha256((INCONTAINER / "pytest.ini").read_bytes()).digest())
    h.update(hashlib.sha256(repo_archive).digest())
    return h.hexdigest()[:32]


def bytecode_dir(key: str) -> Path:
    """Where the tree of ``key`` is kept (it exists once built)."""
    return cache_dirs.bytecode() / key


def build_command(public: list[str], pythonpath: list[str] = ()) -> list[str]:
    """The sandbox command (the sandbox user's, in the pristine repository) that compiles
    the repository (``checked-hash`` bytecode) and collects the public suite as the runners
    do (their pytest configuration; ``pythonpath``: absolute directories on ``sys.path``)
    with a writable prefix, both with ``-W error``, then archives the prefix's
    ``work/repo`` tree to :data:`_OUT`. Errors of the compile and the collection are not
    the command's: what compiled is kept."""
    env = ["env", "-u", "PYTHONDONTWRITEBYTECODE", 'PYTHONPYCACHEPREFIX="$out"',
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1",
           *([f"PYTHONPATH={shlex.quote(':'.join(pythonpath))}"] if pythonpath else [])]
    py = " ".join([*env, PYTHON, "-s", "-P", "-W", "error", "-X", 'pycache_prefix="$out"'])
    collect = " ".join([
        "-m pytest", "-c", f"{HARNESS_DIR}/pytest.ini", f"--rootdir={REPO}",
        "-p", "pytest_timeout", "-p", "no:cacheprovider", "--import-mode=prepend", "--co",
        "-q", *map(shlex.quote, public)])
    script = "\n".join([
        "set -u", 'out=$(mktemp -d /tmp/proctor-pyc.XXXXXX) || exit 90',
        f"cd {REPO} || exit 90",
        f"{py} -m compileall -q -r 1000 --invalidation-mode checked-hash . >/dev/null 2>&1",
        f"{py} {collect} >/dev/null 2>&1",
        f'test -d "$out{REPO}" || exit 91',
        f'exec tar -C "$out{REPO}" -cf {_OUT} .',
    ])
    return ["sh", "-c", script]


def build_bytecode(sb: Sandbox, public: list[str], timeout: float,
                   pythonpath: list[str] = ()) -> dict[str, bytes] | None:
    """Compile in ``sb`` (the pristine repository at ``/work/repo``, the public tests put
    back; ``pythonpath`` as :func:`build_command` takes it): relative path -> bytes of
    every ``.pyc`` of the tree, or None when the command failed, timed out or left nothing
    usable."""
    res = sb.run(build_command(public, pythonpath), timeout=timeout)
    if not res.ok:
        return None
    data = sb.get_file(_OUT, MAX_TREE_BYTES)
    return None if data is None else pyc_files(data)


def pyc_files(archive: bytes) -> dict[str, bytes] | None:
    """The regular ``.pyc`` files of a tar (relative path -> bytes); anything else in it
    (links, devices, paths leaving the tree) is left out. None when it is not a tar or
    holds no ``.pyc``."""
    out: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
            for info in tar:
                name = os.path.normpath(info.name)
                if not info.isreg() or not name.endswith(".pyc") or name.startswith(("/", "..")):
                    continue
                member = tar.extractfile(info)
                if member is not None:
                    out[name] = member.read()
    except (tarfile.TarError, OSError):
        return None
    return out or None


def store_bytecode(key: str, files: dict[str, bytes]) -> Path | None:
    """Write ``files`` as the tree of ``key`` (files 0444, directories 0555; written
    aside, then renamed into place, so a reader sees a whole tree or none). Returns its
    directory; None when it cannot be written (the runs then compile from source)."""
    final = bytecode_dir(key)
    if final.is_dir():
        return final
    tmp = None
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
        for rel, data in files.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(0o444)
        for d in sorted((p for p in tmp.rglob("*") if p.is_dir()), reverse=True):
            d.chmod(0o555)
        tmp.chmod(0o555)
        os.replace(tmp, final)
        return final
    except OSError:
        if final.is_dir():  # another process put it there first
            return final
        return None
    finally:
        if tmp is not None and tmp.exists():
            _remove_tree(tmp)


def _remove_tree(path: Path) -> None:
    for d in [path, *(p for p in path.rglob("*") if p.is_dir())]:
        try:
            d.chmod(0o755)
        except OSError:
            pass
    shutil.rmtree(path, ignore_errors=True)
