"""Abuse patches against the toolz example, and the small-limits task they run on.
Shared by ``tests/test_abuse.py`` and ``bench/soak.py``.

The task is the toolz example with short timeouts and small limits (``LIMITS``), so "2x the
memory limit" is 1 GiB and "far beyond the disk limit" is thousands of times the 128 MiB
/tmp: the same code paths as 8 GiB or 10 GiB, without putting the host at risk.
"""

from __future__ import annotations

import shutil
from pathlib import Path

LIMITS = {"memory_mib": 512, "pids": 128, "disk_mib": 256, "tmp_mib": 128,
          "file_size_mib": 64}
#: ``per_test``: a hung test costs little (toolz's slowest test takes ~20 ms). ``per_suite``
#: bounds the cases whose every hung test is killed from outside (``test_ignores_sigalrm``):
#: long enough on a loaded machine for the tests before the first hung one to report.
TIMEOUTS = {"per_test": 1, "per_suite": 15, "per_patch": 45}
#: One run of each state: these cases are about limits, not flaky tests.
BASELINE = {"runs": 1}
ABUSE_TOML = (
    "\n[limits]\n" + "".join(f"{k} = {v}\n" for k, v in LIMITS.items())
)
FIRST = "    return next(iter(seq))\n\n\ndef second"
IMPORTS = "import operator\n"
MiB = 1024**2

#: name -> (anchor to replace in toolz/itertoolz.py, replacement). Anchors in `first` hurt
#: only the tests that call it; anchors at import hurt every test.
ABUSES = {
    "fork_bomb_at_import": (IMPORTS, IMPORTS + (
        "import os as _os\n"
        "while True:\n"
        "    try:\n"
        "        _os.fork()\n"
        "    except OSError:\n"
        "        pass\n")),
    "allocate_twice_the_memory_limit": (FIRST, (
        f"    big = bytearray({2 * LIMITS['memory_mib']} * 1024 * 1024)\n"
        "    big[::4096] = b'x' * len(big[::4096])\n"
        "    return next(iter(seq))\n\n\ndef second")),
    "fill_tmp_far_beyond_the_limit": (FIRST, (
        "    import itertools\n"
        "    for i in itertools.count():  # 10 GiB if nothing stopped it\n"
        "        with open(f'/tmp/fill-{i}', 'wb') as fh:\n"
        "            for _ in range(32):\n"
        "                fh.write(b'x' * 1024 * 1024)\n"
        "        if i > 320:\n"
        "            break\n"
        "    return next(iter(seq))\n\n\ndef second")),
    "fill_the_repo_far_beyond_the_limit": (FIRST, (
        "    import itertools, os\n"
        "    here = os.path.dirname(os.path.abspath(__file__))\n"
        "    for i in itertools.count():\n"
        "        with open(os.path.join(here, f'fill-{i}.bin'), 'wb') as fh:\n"
        "            for _ in range(32):\n"
        "                fh.write(b'x' * 1024 * 1024)\n"
        "        if i > 320:\n"
        "            break\n"
        "    return next(iter(seq))\n\n\ndef second")),
    "huge_stdout": (FIRST, (
        "    import atexit, os, sys\n"
        "    def flood():\n"
        "        for _ in range(1024):  # 1 GiB to the real stdout after pytest's capture\n"
        "            os.write(1, b'x' * 1024 * 1024)\n"
        "    atexit.register(flood)\n"
        "    for _ in range(5 * 1024):  # 5 GiB while captured\n"
        "        sys.stdout.write('y' * 1024 * 1024)\n"
        "    return next(iter(seq))\n\n\ndef second")),
    "infinite_loop_in_one_test": (FIRST, (
        "    while True:\n"
        "        pass\n\n\ndef second")),
    "test_ignores_sigalrm": (FIRST, (
        "    import signal\n"
        "    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
        "    while True:\n"
        "        pass\n\n\ndef second")),
    "double_forked_daemon": (IMPORTS, IMPORTS + (
        "import os as _os, time as _time\n"
        "if _os.fork() == 0:\n"
        "    _os.setsid()\n"
        "    if _os.fork() == 0:\n"
        "        while True:  # keeps running after pytest exits, stdout held open\n"
        "            _time.sleep(1)\n"
        "    _os._exit(0)\n")),
    "outbound_connection": (FIRST, (
        "    import socket\n"
        "    for host in ('10.255.255.1', '127.0.0.1'):\n"
        "        try:\n"
        "            socket.create_connection((host, 80), timeout=2).close()\n"
        "            return 'CONNECTED'\n"
        "        except OSError:\n"
        "            pass\n"
        "    raise RuntimeError('no network')\n\n\ndef second")),
}
#: Abuses whose tests all fail (the suite never completes or every import fails).
WHOLE_SUITE = {"fork_bomb_at_import"}
#: Abuses that change nothing a test checks: a plain no-op-like score is the right answer.
HARMLESS = {"double_forked_daemon"}



def make_abuse_task(toolz_task: Path, dest: Path) -> Path:
    """Copy the toolz task to ``dest`` with ``TIMEOUTS``, ``BASELINE`` and ``LIMITS``; returns
    ``dest``."""
    shutil.copytree(toolz_task, dest)
    toml = (dest / "task.toml").read_text()
    for key, value in {**TIMEOUTS, **BASELINE}.items():
        toml = "\n".join(f"{key} = {value}" if line.startswith(f"{key} =") else line
                         for line in toml.splitlines()) + "\n"
    (dest / "task.toml").write_text(toml + ABUSE_TOML)
    return dest
