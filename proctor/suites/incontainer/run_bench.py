"""Run a task's benchmark command once and measure it (inside the sandbox).

Usage: ``python -I -B run_bench.py REPO [DIR...] -- ARGV...``. Runs ARGV as a child with
cwd=REPO and ``PYTHONPATH=REPO:DIR...`` (the DIRs: the task's ``pythonpath``), its output
captured (last 64 KiB kept). Prints one JSON line:
``{"exit_code", "wall_s", "max_rss_mib", "output"}``; ``max_rss_mib`` is the peak resident
set size of the child processes (``getrusage(RUSAGE_CHILDREN)``, KiB on Linux).
"""

import json
import os
import resource
import subprocess
import sys
import time

KEEP = 64 * 1024


def main() -> None:
    repo, argv = sys.argv[1], sys.argv[sys.argv.index("--") + 1:]
    # the repo, then the task's pythonpath (absolute, ':'-separated) when given
    path = ":".join([repo, *sys.argv[2:sys.argv.index("--")]])
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp"),
           "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
    if sys.pycache_prefix:  # this runner's (-X pycache_prefix): no .pyc of the repo is read
        env["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix
    start = time.perf_counter()
    try:
        proc = subprocess.run(argv, cwd=repo, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        code, output = proc.returncode, proc.stdout[-KEEP:].decode("utf-8", "replace")
    except OSError as exc:
        code, output = 127, f"cannot start the benchmark: {exc}"
    wall = time.perf_counter() - start
    rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"exit_code": code, "wall_s": wall, "max_rss_mib": rss_kib / 1024,
                      "output": output}))


if __name__ == "__main__":
    main()
