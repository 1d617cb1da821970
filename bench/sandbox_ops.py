"""What one Docker sandbox operation costs: wall time and the whole machine's busy CPU.

    python bench/sandbox_ops.py [--n 30]

Each operation is repeated ``--n`` times on the sandbox image, one after the other, and
timed as a whole (median of nothing: the mean over the repeats, so the engine's background
work is charged to what caused it):

- **container**: a sandbox's whole life (create, start, attach, close);
- **command (exec)**: ``true`` as a ``docker exec``, what every command cost before PID 1's
  channel, and what root's commands still cost;
- **command (channel)**: ``true`` over PID 1's command channel (the sandbox user's commands);
- **file read**: ``get_file`` of a 4 KiB file (root's ``cat``, a ``docker exec``);
  **file copy**: ``put_files`` of one as the sandbox user (over the channel).

Busy CPU comes from ``/proc/stat`` (all but idle and iowait): meaningful on a quiet machine
(the load average is printed). Prints each operation's wall and CPU milliseconds and the
channel's ratios to the exec.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.cpu import busy_s
from proctor.sandbox import DockerSandbox, docker_client, resolve_image


def timed(n: int, op) -> tuple[float, float]:
    """(wall ms, machine busy CPU ms) per call of ``op``, over ``n`` calls."""
    op()  # warm-up
    b0, w0 = busy_s(), time.monotonic()
    for _ in range(n):
        op()
    return (time.monotonic() - w0) * 1000 / n, (busy_s() - b0) * 1000 / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=30)
    args = ap.parse_args()
    image, _ = resolve_image(docker_client())
    load0 = os.getloadavg()[0]
    rows: dict[str, tuple[float, float]] = {}
    rows["container"] = timed(args.n, lambda: DockerSandbox(image).close())
    with DockerSandbox(image) as sb:
        sb.put_files("/work/repo", {"f.txt": b"x" * 4096})
        channel = sb._channel
        rows["command (channel)"] = timed(args.n, lambda: sb.run(["true"], timeout=10))
        rows["file read"] = timed(args.n, lambda: sb.get_file("/work/repo/f.txt"))
        rows["file copy"] = timed(
            args.n, lambda: sb.put_files("/work/repo", {"g.txt": b"y" * 4096}))
        sb._channel = None  # every command a docker exec from here
        rows["command (exec)"] = timed(args.n, lambda: sb.run(["true"], timeout=10))
        sb._channel = channel
    print(f"{args.n} of each, image {image}; load average {load0:.1f} -> "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'operation':20} {'wall ms':>8} {'CPU ms':>8}")
    for name, (wall, cpu) in rows.items():
        print(f"{name:20} {wall:8.1f} {cpu:8.1f}")
    (ew, ec), (cw, cc) = rows["command (exec)"], rows["command (channel)"]
    print(f"channel / exec: wall {cw / ew:.2f}x, CPU {cc / ec:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
