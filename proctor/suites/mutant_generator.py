"""Mutant generation on the host, in warm long-lived processes (the CPU of each rollout).

Generating mutants in the sandbox costs every rollout a fresh interpreter that loads mutmut
and libcst (~0.3 s of CPU, most of the step's preparation). Generation only *parses* the
patched sources (no code of the repo runs), so it can run on the host in a process that
stays up: ``mutmut_adapter.py serve`` (the same code, the same mutmut and libcst as the
sandbox's, so the same mutants, see ``tests/test_mutant_generator.py``).

Where its libraries come from:

* docker backend: the image's own ``site-packages``, copied once per image id into
  ``$PROCTOR_CACHE_DIR/gen-tools/<image id>`` and run by this host's Python, which must be
  the image's version (:data:`~proctor.sandbox.toolchain.SANDBOX_PYTHON`); ``-I -S``, so
  nothing of the host's environment is on its path;
* local backend: the tools venv's own interpreter.

Confinement: libcst parses the patch's code, so the process runs under bubblewrap when it
is there (read-only view of the interpreter and the libraries only, no network, its own
PID namespace, an unprivileged user namespace and no capabilities when we are root); where
bubblewrap is missing or cannot start, it runs unconfined with the same limits.

Anything that goes wrong (another Python, a library that will not load, a request over its
timeout, a dead process, an answer it cannot give) makes :func:`generate` return None: the
caller then generates in the sandbox as before, whose verdict stands. The process has an
address-space limit (:data:`~proctor.generator_process.MEMORY_LIMIT_BYTES`) and each
request a timeout, so a pathological source cannot take the host down. Thread-safe: each
concurrent caller gets a process of its own from a small pool. The processes stay up
between rollouts (the first is started ahead, :func:`warm`) and end when their stdin
closes, which it does with this process however it ends (a CLI daemon's spare: with the
runner that took it and that runner's watcher). A pool takes a generator started
ahead for it, by ``proctor score`` before its imports or by the CLI daemon
(:mod:`proctor.generator_process`, which holds the processes themselves).

The answers are kept per process (:data:`ANSWERS_MAX_BYTES` of their JSON, the least
recently used out first), keyed by the tools, the adapter's code and the whole request:
generation is a pure function of them, so the same changed sources scored again in one
process get the same mutants without the ~0.05-0.1 s of parsing, which sits on the mutation
step's path (patches that differ only in tests or words, an in-process ``score`` of the same
patch, a retry after an infrastructure error; a batch's identical patches already share one
record). Only a clean answer is kept: a request that failed, or whose answer names an error
(which a memory limit could have caused), is asked again.
"""

from __future__ import annotations

import atexit
import copy
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile
import threading
import time
from collections import OrderedDict
from pathlib import Path

from proctor import cache_dirs, generator_process
from proctor.generator_process import BROKEN_RETRY_S, START_TIMEOUT_S, Server
from proctor.sandbox import SANDBOX_PYTHON, SANDBOX_TOOLS

#: Seconds to wait for one answer by default.
REQUEST_TIMEOUT_S = 10.0
#: Bytes of answers (their JSON) kept per process.
ANSWERS_MAX_BYTES = 64 * 1024**2
SITE_PACKAGES = f"/opt/proctor/venv/lib/python{SANDBOX_PYTHON}/site-packages"
MUTMUT = SANDBOX_TOOLS["mutmut"]


class _Pool:
    """Idle servers of one interpreter + library path, reused across rollouts. ``argvs``:
    ways to start one, tried in order until one starts (then kept).

    A pool whose servers cannot start is *broken* for :data:`BROKEN_RETRY_S` seconds, then
    tried again: a start that failed because the machine was loaded (the generator did not
    answer within :data:`START_TIMEOUT_S`) does not disable host generation for the life of
    the process, and a pool with nothing to start (``argvs`` empty) is not started at all.
    An idle server that died while it waited is dropped, and a request that a reused
    server could not take (its process gone, not a timeout) is asked once more of a fresh
    one."""

    def __init__(self, argvs: list[list[str]],
                 origin: tuple[str, list[str]] | None = None) -> None:
        self.argvs = argvs
        self.origin = origin  # (python, library path) the argvs were made from
        self.idle: list[Server] = []
        self.lock = threading.Lock()
        self.ready = threading.Condition(self.lock)  # a warming server was added, or failed
        self.broken: str | None = None  # why the last start failed, while it stands
        self.broken_at = 0.0  # time.monotonic() of that failure
        self.warming = False  # a server is being started for ``idle`` (:meth:`warm`)

    def warm(self) -> None:
        """Start one server for ``idle`` unless one is idle or being started, or the pool
        is broken (blocks while it starts: call it from a background thread, see
        :func:`warm`). A request meanwhile waits for that server rather than start its own."""
        with self.lock:
            if self.idle or self.warming or not self.argvs or (
                    self.broken and time.monotonic() - self.broken_at < BROKEN_RETRY_S):
                return
            self.warming = True
        server = None
        try:
            server = self._start()
        finally:
            with self.lock:
                if server is not None:
                    self.idle.append(server)
                self.warming = False
                self.ready.notify_all()

    def generate(self, files: dict, timeout: float, max_mutants: int | None = None,
                 seed: int = 0, import_roots: list[str] = ()) -> dict | None:
        request = {"files": files, "max_mutants": max_mutants, "seed": seed,
                   "import_roots": list(import_roots)}
        server, reused = self._take()
        if server is None:
            return None
        started = time.monotonic()
        answer = server.ask(request, timeout)
        if answer is None and reused and not server.timed_out:
            server, _ = self._take(fresh=True)  # the idle one had died: a new one, once
            if server is None:
                return None
            answer = server.ask(request, max(1.0, timeout - (time.monotonic() - started)))
        if server.alive:
            with self.lock:
                self.idle.append(server)
        return answer

    def _take(self, fresh: bool = False) -> tuple[Server | None, bool]:
        """An idle live server (reused=True) or a newly started one; None if none starts."""
        dead = []
        server = None
        with self.lock:
            if self.broken and time.monotonic() - self.broken_at < BROKEN_RETRY_S:
                return None, False
            if not fresh:  # a server being warmed is sooner than a new one
                self.ready.wait_for(lambda: self.idle or not self.warming, START_TIMEOUT_S)
            while self.idle and not fresh:
                candidate = self.idle.pop()
                if candidate.alive:
                    server = candidate
                    break
                dead.append(candidate)
        for s in dead:
            s.close()
        if server is not None and server.ensure_ready(MUTMUT):  # a spare reads its ready line here
            return server, True
        return self._start(), False

    def _start(self) -> Server | None:
        problems = []
        for argv in list(self.argvs):
            try:
                server = Server(argv, mutmut=MUTMUT)
            except OSError as exc:
                problems.append(str(exc))
                continue
            self.argvs = [argv]  # what worked, from now on
            with self.lock:
                self.broken = None
            generator_process.remember(self.origin, argv)
            return server
        with self.lock:
            self.broken = "; ".join(problems) or "no interpreter with these tools"
            self.broken_at = time.monotonic()
        return None

    def close(self) -> None:
        with self.lock:
            servers, self.idle = self.idle, []
        for s in servers:
            s.close()


_pools: dict[str, _Pool] = {}
_pools_lock = threading.Lock()
#: request key -> (answer, its size in bytes), the most recently used last.
_answers: OrderedDict[str, tuple[dict, int]] = OrderedDict()
_answers_bytes = 0
_answers_lock = threading.Lock()
atexit.register(lambda: close_all())


def _image_site_packages(sb) -> Path | None:
    """The docker image's site-packages, copied once into the cache; None if unavailable."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" != SANDBOX_PYTHON:
        return None
    image_id = getattr(sb, "image_id", None)
    client = getattr(sb, "_client", None)
    if not image_id or client is None:
        return None
    root = cache_dirs.gen_tools() / image_id.replace(":", "-")
    if (root / "site-packages").is_dir():
        return root / "site-packages"
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root.parent))
    container = None
    try:
        container = client.containers.create(image_id, command=["true"], network_disabled=True)
        stream, _ = container.get_archive(SITE_PACKAGES)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            tar.extractall(tmp, filter="data")
        try:
            tmp.rename(root)
        except OSError:  # another process made it first
            pass
    except Exception:  # noqa: BLE001 - no host generation; the sandbox generates
        return None
    finally:
        if container is not None:
            try:
                container.remove(force=True)
            except Exception:  # noqa: BLE001
                pass
        shutil.rmtree(tmp, ignore_errors=True)
    return root / "site-packages" if (root / "site-packages").is_dir() else None


def _pool_for(sb) -> _Pool:
    """The pool for ``sb``'s tools, made once per process: a failure to find them (another
    Python, the copy from the image failed) is remembered as a pool that does not start, so
    it is not looked for again, with a container each time, on every rollout; only after
    :data:`BROKEN_RETRY_S` seconds (a transient failure of the copy)."""
    venv = getattr(sb, "_venv", None)
    key = f"venv:{venv}" if venv is not None else f"image:{getattr(sb, 'image_id', None)}"
    with _pools_lock:
        known = _pools.get(key)
        if known is not None and (known.argvs or known.broken is None
                                  or time.monotonic() - known.broken_at < BROKEN_RETRY_S):
            return known
    origin: tuple[str, list[str]] | None = None
    if venv is not None:  # local backend: the tools venv's interpreter
        python = Path(venv) / "bin" / "python"
        if python.exists():
            site = sorted(Path(venv).glob("lib/python*/site-packages"))
            origin = (str(python), [str(p) for p in site])
    else:
        site = _image_site_packages(sb)
        if site is not None:
            origin = (sys.executable, [str(site)])
    argvs = generator_process.argvs(*origin) if origin is not None else []
    with _pools_lock:
        if _pools.get(key) is known:  # new, or the tools looked for again
            _pools[key] = _Pool(argvs, origin)
            spare = generator_process.adopt(argvs)  # started ahead for this process
            if spare is not None:  # its first way: if it fails, the others are tried
                _pools[key].idle.append(spare[1])
        return _pools[key]


def generate(sb, sources: dict[str, tuple[str, list[int]]], *,
             max_mutants: int | None = None, seed: int = 0,
             timeout: float = REQUEST_TIMEOUT_S, import_roots: list[str] = ()) -> dict | None:
    """Mutants of ``sources`` (repo path -> (patched text, changed line numbers)) made on
    the host with the tools of ``sb``'s image or venv; at most ``max_mutants`` of them,
    drawn with ``seed`` before rendering (``mutmut_adapter.generate_all``);
    ``import_roots``: the task's ``pythonpath`` (repo dirs whose files import without it).

    Returns ``{"files": {path: rewritten source}, "mutants": [...], "errors": [...]}``
    exactly as ``mutmut_adapter.py generate`` would have made them in the sandbox (a copy of
    the answer kept for the same tools and request, when there is one), or None when the
    host cannot generate (then generate in the sandbox). Never raises."""
    if os.environ.get("PROCTOR_HOST_MUTANTS", "1") == "0":
        return None
    try:
        pool = _pool_for(sb)
    except Exception:  # noqa: BLE001 - no host generation; the sandbox generates
        return None
    files = {p: {"code": c, "lines": sorted(n)} for p, (c, n) in sources.items()}
    key = hashlib.sha256(json.dumps([pool.origin, _adapter_digest(), files, max_mutants, seed,
                                     list(import_roots)], sort_keys=True).encode()).hexdigest()
    kept = _kept_answer(key)
    if kept is not None:
        return kept
    try:
        answer = pool.generate(files, timeout, max_mutants, seed, import_roots)
    except Exception:  # noqa: BLE001 - only a shortcut: the sandbox generates
        return None
    if not answer or "fatal" in answer or not isinstance(answer.get("mutants"), list):
        return None
    if not answer.get("errors"):
        _keep_answer(key, answer)
    return answer


def _adapter_digest() -> str:
    """sha256 of the generator's code as a generator started now would run it."""
    try:
        return hashlib.sha256((generator_process.ADAPTER_DIR / "mutmut_adapter.py")
                              .read_bytes()).hexdigest()
    except OSError:
        return ""


def forget_answers() -> None:
    """Drop every kept answer: the next request of each kind is asked of a generator (a
    benchmark of distinct patches scoring one patch again and again, say)."""
    global _answers_bytes
    with _answers_lock:
        _answers.clear()
        _answers_bytes = 0


def _kept_answer(key: str) -> dict | None:
    """A copy of the answer kept under ``key`` (now the most recently used), or None."""
    with _answers_lock:
        kept = _answers.get(key)
        if kept is None:
            return None
        _answers.move_to_end(key)
    return copy.deepcopy(kept[0])


def _keep_answer(key: str, answer: dict) -> None:
    """Keep a copy of ``answer``; the least recently used go while over
    :data:`ANSWERS_MAX_BYTES` (an answer larger than that is not kept)."""
    global _answers_bytes
    size = len(json.dumps(answer))
    if size > ANSWERS_MAX_BYTES:
        return
    answer = copy.deepcopy(answer)
    with _answers_lock:
        if key in _answers:
            return
        _answers[key] = (answer, size)
        _answers_bytes += size
        while _answers_bytes > ANSWERS_MAX_BYTES:
            _, (_, gone) = _answers.popitem(last=False)
            _answers_bytes -= gone


def warm(sb) -> None:
    """Start a generator for ``sb``'s tools in a background thread when none is idle
    (:meth:`_Pool.warm`), so the first rollout of a process does not wait for it; a no-op
    when host generation is off or cannot start. Returns once the tools are found (the
    first call for an image copies them out of it, as the first request would), never
    raises."""
    if os.environ.get("PROCTOR_HOST_MUTANTS", "1") == "0":
        return
    try:  # here, not in the thread: the first call may copy the tools out of the image
        pool = _pool_for(sb)
    except Exception:  # noqa: BLE001 - only a head start: a request starts its own
        return
    threading.Thread(target=pool.warm, name="proctor-mutant-generator-warm",
                     daemon=True).start()


def close_all() -> None:
    """Stop every idle generator process of this process, and the spares no pool took
    (tests, shutdown)."""
    with _pools_lock:
        pools = list(_pools.values())
    for p in pools:
        p.close()
    generator_process.close_spares()
