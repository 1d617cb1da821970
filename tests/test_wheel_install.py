"""Proctor installed the way trainers install it: a wheel built from this checkout,
pip-installed into a fresh venv outside the repository.

* ``test_wheel_ships_every_package_file`` (no Docker, ~10 s): every file under ``proctor/``
  is in the wheel, so a data file the code reads at run time (the sandbox Dockerfile, the
  scripts and ini copied into sandboxes) cannot be left out of the package unnoticed.
* ``test_installed_wheel_builds_image_and_scores`` (Docker, ~1 min): from a cwd outside the
  repository the installed ``proctor image build`` reports the checkout's image tag (a
  content hash, so the image is reused, not rebuilt), and ``proctor score`` of the example's
  reference patch gives the checkout's reward, components and flags.

The wheel is built by ``python -m build`` (the ``[dev]`` extra): an sdist of a copy of the
package's sources, then the wheel from that sdist, both with the setuptools backend of
pyproject.toml in an isolated build environment. So a file the sdist leaves out is missing
from the wheel too, and build/ or egg-info left in the checkout cannot put stale files into
it. Dependencies come from PyPI through pip's cache.
"""

from __future__ import annotations

import email.parser
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE = REPO_ROOT / "proctor"
#: What the wheel is built from (pyproject.toml names README.md as the long description).
SOURCES = ("pyproject.toml", "README.md", "proctor")
JUNK = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    res = subprocess.run(argv, capture_output=True, text=True, **kw)
    assert res.returncode == 0, (f"{argv} exited {res.returncode}\n"
                                 f"stdout:\n{res.stdout[-3000:]}\nstderr:\n{res.stderr[-3000:]}")
    return res


def _outside_repo(path: Path) -> Path:
    assert not path.resolve().is_relative_to(REPO_ROOT), f"{path} is inside the checkout"
    return path


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from a clean copy of the checkout's package sources."""
    if importlib.util.find_spec("build") is None:
        pytest.fail("the wheel is built with `python -m build`: pip install -e '.[dev]'")
    root = _outside_repo(tmp_path_factory.mktemp("wheel-build"))
    src = root / "src"
    src.mkdir()
    for name in SOURCES:
        if (REPO_ROOT / name).is_dir():
            shutil.copytree(REPO_ROOT / name, src / name, ignore=JUNK)
        else:
            shutil.copy(REPO_ROOT / name, src / name)
    _run([sys.executable, "-m", "build", "--outdir", str(root / "dist"), str(src)])
    (built,) = (root / "dist").glob("proctor-*.whl")
    assert len(list((root / "dist").glob("proctor-*.tar.gz"))) == 1  # the wheel's sdist
    return built


def _package_files() -> set[str]:
    """Paths (relative to the repository, POSIX) of the files under ``proctor/`` that belong
    in the package: everything but bytecode caches."""
    return {p.relative_to(REPO_ROOT).as_posix() for p in PACKAGE.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


def test_wheel_ships_every_package_file(wheel):
    from proctor.sandbox.image import DOCKERFILE
    from proctor.suites import INCONTAINER

    with zipfile.ZipFile(wheel) as zf:
        shipped = {n for n in zf.namelist() if n.startswith("proctor/")}
        dockerfile = zf.read("proctor/sandbox/Dockerfile.sandbox")
        (meta_name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.parser.Parser().parsestr(zf.read(meta_name).decode())
    missing = sorted(_package_files() - shipped)
    assert missing == [], (f"files under proctor/ not in the wheel (add them to "
                           f"[tool.setuptools.package-data] in pyproject.toml): {missing}")
    # What the code reads at run time, named as the code names it.
    read_at_run_time = [Path(str(DOCKERFILE)), *(p for p in INCONTAINER.iterdir() if p.is_file())]
    for path in read_at_run_time:
        assert path.relative_to(REPO_ROOT).as_posix() in shipped, path
    # The repository root's Dockerfile is the packaged one (a symlink), byte for byte: the
    # image tag hashes it, so a wheel install and the checkout build the same image.
    assert (REPO_ROOT / "Dockerfile.sandbox").read_bytes() == dockerfile
    # The extras the README's Install section names, and the console script.
    assert set(metadata.get_all("Provides-Extra")) >= {"ray", "serve", "report", "trl", "verl",
                                                       "openrlhf"}
    with zipfile.ZipFile(wheel) as zf:
        (entry_points,) = [n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")]
        assert "proctor = proctor.launcher:main" in zf.read(entry_points).decode()


def _venv_with(wheel: Path, root: Path) -> Path:
    """A fresh venv under ``root`` with the wheel and its dependencies; its bin directory."""
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
          "--disable-pip-version-check", str(wheel)], cwd=root)
    return venv / "bin"


def _installed_env(bindir: Path, cache: Path) -> dict[str, str]:
    """The test session's environment (temp dir, sandbox dir) for the installed package:
    nothing of the checkout on the path, a baseline and result cache of its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(bindir.parent),
               PROCTOR_CACHE_DIR=str(cache))
    return env


def _comparable(record: dict) -> dict:
    """The parts of a record that must not depend on where Proctor was installed from."""
    keep = ("status", "reward", "components", "weights", "penalties", "diff_cost", "progress",
            "flags", "verdict")
    out = {k: record.get(k) for k in keep}
    out["integrity_violated"] = record["integrity"]["violated"]
    return out


@pytest.mark.docker
def test_installed_wheel_builds_image_and_scores(wheel, tmp_path_factory, docker_ready,
                                                 docker_engine, toolz_task):
    import proctor

    root = _outside_repo(tmp_path_factory.mktemp("wheel-venv"))
    bindir = _venv_with(wheel, root)
    cache = root / "cache"
    env = _installed_env(bindir, cache)
    work = root / "work"  # the cwd of every command: outside the checkout
    work.mkdir()

    where = _run([str(bindir / "python"), "-c", "import proctor; print(proctor.__file__)"],
                 cwd=work, env=env).stdout.strip()
    assert Path(where).is_relative_to(root / "venv"), f"imported {where}, not the wheel"

    build = _run([str(bindir / "proctor"), "image", "build"], cwd=work, env=env)
    assert build.stdout.strip().splitlines()[-1] == docker_ready, build.stderr
    assert f"{docker_ready} is up to date" in build.stderr, build.stderr  # reused, not rebuilt

    task = shutil.copytree(toolz_task, root / "task", symlinks=True)
    proc = subprocess.Popen([str(bindir / "proctor"), "score", str(task),
                             str(task / "reference.patch"), "--json"],
                            cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:  # the checkout's record meanwhile (the two runs share nothing but the engine)
        checkout = proctor.score(toolz_task, (toolz_task / "reference.patch").read_bytes())
    finally:
        out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, f"proctor score exited {proc.returncode}\n{err[-3000:]}"
    installed = json.loads(out)
    left = docker_engine.containers.list(
        all=True, filters={"label": f"org.proctor.owner_pid={proc.pid}"}, ignore_removed=True)
    assert left == [], f"the installed proctor left containers: {left}"
    assert (cache / "baselines").is_dir(), "the installed run did not use its own cache"

    assert checkout.status == "scored", checkout.reason
    assert installed["status"] == "scored", installed.get("reason")
    assert _comparable(installed) == _comparable(checkout.model_dump(mode="json", by_alias=True))


@pytest.mark.docker
@pytest.mark.serial  # compares the engine's whole image list before and after
def test_installed_without_pip_says_so(wheel, tmp_path_factory, docker_ready, docker_engine):
    """A venv with no pip (``uv venv``'s default) cannot download the wheelhouse an image
    build needs: ``proctor image build`` exits 3 with that reason, builds nothing."""
    root = _outside_repo(tmp_path_factory.mktemp("wheel-nopip"))
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
          "--disable-pip-version-check", str(wheel)], cwd=root)
    env = _installed_env(venv / "bin", root / "cache")
    before = {i.id for i in docker_engine.images.list()}
    # A base that exists locally but has no sandbox image built on it yet: a build is needed.
    res = subprocess.run([str(venv / "bin" / "proctor"), "image", "build", "--base", docker_ready],
                         cwd=root, env=env, capture_output=True, text=True)
    message = " ".join(res.stderr.split())
    assert res.returncode == 3, res.stderr
    assert "has no pip" in message and "ensurepip" in message, res.stderr
    assert "Traceback" not in res.stderr
    assert {i.id for i in docker_engine.images.list()} == before
