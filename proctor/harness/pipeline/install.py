"""``install = true``: the (patched) repository pip-installed in the sandbox, offline.

For projects whose tests need the package installed: an ``importlib.metadata`` version
lookup, its entry points. :func:`install_repo` builds a wheel of a copy of the repository
(so the build's ``build/`` and ``*.egg-info`` never land in the repository under test) and
installs it, non-editable and without dependencies, into :data:`SITE_DIR`, as the sandbox
user, with no network, no index and no build isolation: the build backend and what it
needs come from the sandbox environment (the image plus the task's ``requirements``).

The image's setuptools (66.1.1) builds wheels only with the ``wheel`` package, which the
image does not have: a setuptools project needs ``wheel`` in the task's ``requirements``
(tested with ``wheel==0.45.1``; ``setuptools>=70.1`` there should do as well, untried).

The runners put :data:`SITE_DIR` on ``sys.path`` after the repository and the task's
``pythonpath`` (:meth:`proctor.task.Task.pythonpath_in`), so the repository's own
files are imported first (a src layout wants ``pythonpath = ["src"]`` for that; mutants
are made in the repository's files) and the installed ``*.dist-info`` is what
``importlib.metadata`` finds. :data:`SITE_DIR` is appended to ``sys.path``, never made a
site directory (the runners start with ``-s``, no ``site.addsitedir``): its ``.pth`` files
are not processed.

:data:`SITE_DIR` is outside the repository (a patch's paths are repository-relative) and is
removed and made afresh by every install, so nothing there predates the install. The build
runs in a copy, so an honest one never writes into the repository: what the patch's build
code changed there (:func:`repo_changes`, read by inode change time, which no process of the
sandbox user can set back) is judged as tampering, as it was never checked before the tests.
"""

from __future__ import annotations

import re
import secrets
import shlex
from dataclasses import dataclass

from proctor.sandbox import PYTHON, SITE_DIR, Sandbox

#: Where the repository is installed (``pip install --target``), outside the repository.
#: Own timeout of the install step (seconds), before the deadline caps it.
INSTALL_TIMEOUT_S = 120.0
#: Bytes of pip's output kept (its tail) in the evidence and in error messages.
OUTPUT_TAIL_BYTES = 4000
#: The note (prefix) of suites that could not run because the install failed.
INSTALL_FAILED = "install_failed"

PIP_ARGS = ("-m", "pip", "install", "--no-index", "--no-deps", "--no-build-isolation",
            "--no-cache-dir", "--use-pep517", "--disable-pip-version-check", "--no-input",
            "--no-compile", "--target")


@dataclass(frozen=True)
class InstallResult:
    """One install: ``ok`` (pip exited 0 in time), pip's ``exit_code``, ``output`` (its
    merged output's last :data:`OUTPUT_TAIL_BYTES` bytes), ``duration_s`` (seconds, in the
    sandbox), ``timed_out``."""

    ok: bool
    exit_code: int
    output: str
    duration_s: float
    timed_out: bool
    command: str
    started: str | None = None  # the sandbox's clock (epoch seconds) before the build ran

    def summary(self) -> str:
        """One line for a note: ``install_failed: <why>: <the build's own last line>`` (the
        last line of the build backend's output pip quotes, else pip's last line)."""
        why = "timed out" if self.timed_out else f"pip exited {self.exit_code}"
        last = _telling_line(self.output)
        return f"{INSTALL_FAILED}: {why}: {last[:300]}" if last else f"{INSTALL_FAILED}: {why}"


def _telling_line(output: str) -> str:
    """The last line before pip's ``[end of output]`` (the backend's own error), else the
    last non-empty line; stripped ("" when there is none)."""
    lines = [ln.strip() for ln in output.splitlines()]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i] == "[end of output]":
            quoted = [ln for ln in lines[:i] if ln]
            if quoted:
                return quoted[-1]
    return next((ln for ln in reversed(lines) if ln), "")


def tail_bytes(text: str, limit: int = OUTPUT_TAIL_BYTES) -> str:
    """The last ``limit`` bytes (UTF-8) of ``text``, cut at a character boundary."""
    data = text.encode("utf-8", "replace")
    return text if len(data) <= limit else data[-limit:].decode("utf-8", "ignore")


def install_script(repo: str, token: str = "") -> str:
    """The shell script :func:`install_repo` runs: print ``@@proctor-<token>-start <epoch
    seconds>``, remove :data:`SITE_DIR`, copy ``repo`` to a fresh directory under ``/tmp``,
    ``pip install --target`` :data:`SITE_DIR` from the copy, remove the copy; exits with
    pip's status (90: the copy failed)."""
    pip = shlex.join([PYTHON, *PIP_ARGS, SITE_DIR, "."])
    return "\n".join([
        "set -u",
        f'echo "@@proctor-{token}-start $(date +%s.%N)"',
        f"rm -rf -- {SITE_DIR} || exit 90",
        'b=$(mktemp -d /tmp/proctor-build-XXXXXXXX) || exit 90',
        f'cp -a -- {shlex.quote(repo)} "$b/src" || {{ rm -rf -- "$b"; exit 90; }}',
        f'(cd "$b/src" && exec {pip} </dev/null) 2>&1',
        "c=$?",
        'rm -rf -- "$b"',
        "exit $c",
    ])


def install_repo(sb: Sandbox, repo: str, timeout: float) -> InstallResult:
    """Install the repository at ``repo`` (in ``sb``) into :data:`SITE_DIR`, as the sandbox
    user (:func:`install_script`). ``timeout``: seconds. Runs the project's build code (the
    patch's, once a patch is applied): the caller kills the sandbox user's processes after.

    Returns the :class:`InstallResult` (a failed or timed-out build is a result, not an
    error). Raises InfraError when the sandbox itself failed."""
    token = secrets.token_hex(8)
    res = sb.run(["sh", "-c", install_script(repo, token)], timeout=timeout, cwd="/work")
    first, _, rest = res.output.partition("\n")
    found = re.fullmatch(rf"@@proctor-{token}-start (\d+\.\d+)", first.strip())
    return InstallResult(ok=res.ok, exit_code=res.exit_code,
                         output=tail_bytes(rest if found else res.output),
                         duration_s=res.duration_s, timed_out=res.timed_out,
                         command=f"pip install --target {SITE_DIR} {repo} (offline, "
                                 f"no deps, no build isolation)",
                         started=found.group(1) if found else None)


def repo_changes(sb: Sandbox, repo: str, since: str | None, timeout: float = 10) -> list[str]:
    """Paths under ``repo`` (relative; ``.`` the repo itself) whose inode changed after
    ``since`` (epoch seconds on the sandbox's clock, :attr:`InstallResult.started`): what the
    install's build code wrote, moved or re-permissioned there. Read as root, after the
    sandbox user's processes were killed. Fails closed: no ``since`` or a failed listing is
    a change (``["(cannot tell: ...)"]``).

    Raises:
        InfraError: the sandbox failed.
    """
    if since is None:
        return ["(cannot tell: the install printed no start time)"]
    res = sb.run(["find", ".", "-newerct", f"@{since}", "-print"], timeout=timeout,
                 cwd=repo, user="0:0")
    if not res.ok:
        return [f"(cannot tell: find exited {res.exit_code}: {res.output[-200:]})"]
    return sorted(ln[2:] if ln.startswith("./") else ln for ln in res.output.splitlines()
                  if ln)
