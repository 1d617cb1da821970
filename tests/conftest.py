"""Shared fixtures: the toolz example task, its candidate patches, the Docker guard, an
isolated baseline cache and temp dir, and the leak check (containers and temp dirs).

Isolation, for the whole session:

* ``PROCTOR_CACHE_DIR`` points at a fresh dir, so no test reads or writes a user's baselines.
* ``TMPDIR`` / ``tempfile.tempdir`` point at a fresh dir: it is the system temp dir as Proctor
  sees it, so the ``proctor-*`` leak check is exact and not disturbed by other processes.

Leak check (``no_leaks``; automatic for every ``@pytest.mark.docker`` test): after the test,
no ``org.proctor`` container created by this process (label ``org.proctor.owner_pid``)
exists and no ``proctor-*`` entry is left in the temp dir. Other processes' containers
(another engineer's test run, say) are not ours to judge, hence the owner filter.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
MAKE_TASK = REPO_ROOT / "examples" / "toolz" / "make_task.py"
LABEL = "org.proctor"
OWNER_LABEL = f"{LABEL}.owner_pid={os.getpid()}"


def _load_make_task():
    spec = importlib.util.spec_from_file_location("toolz_make_task_conftest", MAKE_TASK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- isolation


@pytest.fixture(scope="session", autouse=True)
def _isolated_env(tmp_path_factory) -> Iterator[Path]:
    """Fresh baseline cache and temp dir for the session (see the module docstring)."""
    root = tmp_path_factory.mktemp("proctor-env")
    cache, tmp = root / "cache", root / "tmp"
    cache.mkdir()
    tmp.mkdir()
    # The local backend's sandbox dirs must be reachable by its unprivileged host uid, which
    # pytest's 0700 base temp dir is not: a session dir of their own, leak-checked too.
    local = Path(tempfile.mkdtemp(prefix="proctor-test-local-", dir="/tmp"))
    local.chmod(0o755)
    saved = tempfile.tempdir
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROCTOR_CACHE_DIR", str(cache))
        mp.setenv("TMPDIR", str(tmp))
        mp.setenv("PROCTOR_SANDBOX_DIR", str(local))
        # Under pytest-xdist: the pytest processes tests start (the example's tests on the
        # host) are not xdist workers (pytest-benchmark would disable itself and warn).
        for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT",
                     "PYTEST_XDIST_TESTRUNUID"):
            mp.delenv(name, raising=False)
        tempfile.tempdir = str(tmp)
        try:
            yield cache
        finally:
            tempfile.tempdir = saved
            shutil.rmtree(local, ignore_errors=True)


@pytest.fixture(scope="session")
def proctor_cache_dir(_isolated_env) -> Path:
    """The session's ``PROCTOR_CACHE_DIR``."""
    return _isolated_env


# --------------------------------------------------------------------------- docker


@pytest.fixture(scope="session")
def docker_engine():
    """A docker-py client, or None when no engine answers (never skips)."""
    from proctor.errors import EngineUnavailable
    from proctor.sandbox import docker_client

    try:
        return docker_client(timeout=10)
    except EngineUnavailable:
        return None


@pytest.fixture(scope="session")
def docker_ready(docker_engine) -> str:
    """The sandbox image tag; skips when no engine answers or the image is not built."""
    from proctor.errors import ImageMissing
    from proctor.sandbox import docker_client, resolve_image

    if docker_engine is None:
        try:
            docker_client(timeout=10)
        except Exception as exc:  # noqa: BLE001 - any failure means: skip with the reason
            pytest.skip(f"no Docker engine answers: {exc}")
    try:
        tag, _ = resolve_image(docker_engine)
    except ImageMissing as exc:
        pytest.skip(f"sandbox image missing: {exc}")
    return tag


def our_containers(client) -> list[str]:
    """Ids of the ``org.proctor`` containers (any state) created by this test process."""
    return [c.id for c in client.containers.list(
        all=True, filters={"label": [LABEL, OWNER_LABEL]}, ignore_removed=True)]


class ContainerCounter:
    """``with counter:`` then ``counter.created``: containers this process created inside.

    Streams the engine's ``create`` events live while the block runs. (Replaying them
    afterwards with ``since``/``until`` is unreliable: the engine keeps only the last 256
    events, and concurrent Proctor runs on the same engine overflow that within seconds.)
    """

    def __init__(self, client) -> None:
        self.client = client
        self.created: list[str] = []

    def __enter__(self) -> ContainerCounter:
        self._stream = self.client.events(
            since=int(time.time()) - 1, decode=True,
            filters={"type": "container", "event": "create", "label": [LABEL, OWNER_LABEL]})
        self._seen: list[str] = []
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()
        self._start_ns = time.time_ns()
        return self

    def _pump(self) -> None:
        try:
            for event in self._stream:
                self._seen.append((event["id"], int(event["timeNano"])))
        except Exception:  # noqa: BLE001 - the stream was closed
            pass

    def __exit__(self, *exc) -> None:
        end_ns = time.time_ns()
        time.sleep(0.5)  # let the engine deliver the last events
        self._stream.close()
        self._thread.join(timeout=5)
        # the engine stamps an event after the create call it answers, on this host's clock:
        # a container created before the block (the last one of a rollout that ended just
        # before it, say) is not the block's
        self.created = [cid for cid, t in self._seen if self._start_ns <= t <= end_ns]


@pytest.fixture
def count_containers(docker_engine, docker_ready) -> Callable[[], ContainerCounter]:
    """Factory of :class:`ContainerCounter` on the session's engine."""
    return lambda: ContainerCounter(docker_engine)


def _proctor_temp_entries() -> set[str]:
    """``proctor-*`` entries of the temp dir and of the local backend's sandbox dir, but
    the directories of the local sandboxes waiting in this process's warm pools."""
    from proctor.sandbox import settle_warm

    local = os.environ.get("PROCTOR_SANDBOX_DIR", "/nonexistent")
    dirs = {Path(tempfile.gettempdir()), Path(local)}
    waiting = {str(getattr(sb, "_root", None)) for sb in settle_warm()}
    return {str(p) for d in dirs for p in d.glob("proctor-*")} - waiting


def _left_containers(client) -> list[str]:
    """:func:`our_containers` but the warm sandboxes waiting in this process's pools."""
    from proctor.sandbox import settle_warm

    waiting = {getattr(sb, "container_id", None) for sb in settle_warm()}
    return [cid for cid in our_containers(client) if cid not in waiting]


@pytest.fixture(scope="module")
def warm_module() -> Iterator[None]:
    """Two warm sandboxes per kind kept waiting for the whole module, closed at its end
    (:mod:`proctor.sandbox.warm_pool`): its scores run on sandboxes made ahead, as in a
    batch, so its exact records (found on fresh sandboxes) check that both ways agree.
    The leak check knows a waiting sandbox (container or local dir) from a leaked one."""
    from proctor.sandbox import drain_warm, warm_sandboxes

    with warm_sandboxes(2):
        yield
    drain_warm()


@pytest.fixture
def no_leaks(docker_engine) -> Iterator[None]:
    """After the test: no container of ours labelled ``org.proctor`` and no ``proctor-*``
    entry in the temp dir (both must be empty before, too). Warm Docker sandboxes waiting
    in a pool a module keeps open (``warm_module``) are the pool's, not left behind."""
    if docker_engine is not None:
        assert _left_containers(docker_engine) == [], \
            "org.proctor containers left by earlier tests"
    assert _proctor_temp_entries() == set(), "proctor-* temp dirs left by earlier tests"
    yield
    if docker_engine is not None:
        left = _left_containers(docker_engine)
        for cid in left:  # clean up so one leak does not fail every later test
            docker_engine.containers.get(cid).remove(force=True)
        assert left == [], f"containers labelled {LABEL} left behind: {left}"
    left_tmp = _proctor_temp_entries()
    for name in left_tmp:
        from proctor.sandbox.bwrap_backend import remove_dir

        remove_dir(Path(name))  # unmounts the local backend's tmpfs areas first
    assert left_tmp == set(), f"proctor-* temp dirs left in {tempfile.gettempdir()}: {left_tmp}"


@pytest.fixture(scope="session")
def local_ready() -> str:
    """The local backend's tools venv (built once, cached); skips when bubblewrap is missing
    or the venv cannot be built."""
    from proctor.sandbox import bwrap_backend

    problem = bwrap_backend.unavailable()
    if problem:
        pytest.skip(f"local backend unavailable: {problem}")
    try:
        return bwrap_backend.ensure_env()
    except Exception as exc:  # noqa: BLE001 - skip reason shows the harness message
        pytest.skip(f"local tools venv: {exc}")


@pytest.fixture(autouse=True)
def _docker_marker_guard(request) -> None:
    """``@pytest.mark.docker`` tests need the engine and the image, and get the leak check."""
    if request.node.get_closest_marker("docker") is not None:
        request.getfixturevalue("docker_ready")
        request.getfixturevalue("no_leaks")
    if request.node.get_closest_marker("local") is not None:
        request.getfixturevalue("local_ready")
        request.getfixturevalue("no_leaks")


# --------------------------------------------------------------------------- toolz task


@pytest.fixture(scope="session")
def toolz_make_task():
    """``examples/toolz/make_task.py`` as a module (constants, ``make_patch``...)."""
    return _load_make_task()


@pytest.fixture(scope="session")
def toolz_build(tmp_path_factory, toolz_make_task) -> Path:
    """The example built once for the session: ``task/`` and ``patches/`` in a tmp dir.
    The sdist comes from ``examples/toolz/build/.cache`` (downloaded once if missing)."""
    mk = toolz_make_task
    out = tmp_path_factory.mktemp("toolz-example")
    try:
        mk.build(out)
    except mk.DownloadError as exc:
        pytest.skip(f"PyPI unreachable and no cached sdist in {mk.DEFAULT_CACHE}: {exc}")
    return out


@pytest.fixture(scope="session")
def toolz_task(toolz_build) -> Path:
    """Directory of the example task (task.toml, repo/, hidden/, reference.patch)."""
    return toolz_build / "task"


@pytest.fixture(scope="session")
def toolz_patches(toolz_build) -> dict[str, bytes]:
    """Candidate patches of the example: name (file stem) -> bytes."""
    return {p.stem: p.read_bytes() for p in sorted((toolz_build / "patches").glob("*.patch"))}


@pytest.fixture(scope="session")
def make_toolz_patch(toolz_task, toolz_make_task) -> Callable[[dict], bytes]:
    """``make({repo path: (old text or None, new text)})`` -> a git diff against repo/."""
    return lambda edits: toolz_make_task.make_patch(toolz_task / "repo", edits)
