"""``proctor serve`` under trainer load (issue 13): N concurrent one-query clients, in
OpenRLHF's shape (one sample per ``POST /get_reward``), against ``proctor serve --workers 2``
on 127.0.0.1; baseline: the same patches scored one after the other by ``proctor score``'s
function (:func:`proctor.score`, in this process, so no interpreter start-up is counted),
half of them before the server's run and half after (a shared machine's load drifts).

    python bench/serve.py --clients 6             # 6 clients x 2 rounds = 12 rollouts
    python bench/serve.py --clients 32 --rounds 1 --max-queue 64

Patches: the example's reference fix, each made unique by a comment line at the top of
``getter`` (free of diff cost), so neither run gets a result-cache hit (``proctor score``
writes no cache; the server's cache has never seen them). The task's baseline is computed
(or loaded) before timing.

Prints: the serial baseline's rollouts/min; the server's rollouts/min, client-side p50 / p95
latency, its ``/metrics`` figures, the peak of live sandboxes (the server's own count and
``docker ps`` of containers owned by the server process; must be <= workers), whether every
server reward equals the serial reward of the same patch, and the throughput ratio.
Exit status 1 when the peak exceeds the workers or a reward differs.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.batch import load_make_task
from proctor.harness.batch import prepare_task
from proctor.harness.pipeline.score import score

PROMPT = "Fix getter.\n"


def variants(mk, task_dir: Path, n: int) -> list[str]:
    head, token = "def getter(index):\n", uuid.uuid4().hex[:12]
    out = []
    for i in range(n):
        edits = {}
        for path, (old, new) in mk.PATCHES["reference"].items():
            if path == mk.BUGGY_FILE:
                new = new.replace(head, f"{head}    # bench serve {token}-{i}\n", 1)
            edits[path] = (old, new)
        out.append(mk.make_patch(task_dir / "repo", edits).decode())
    return out


def start_server(workers: int, max_queue: int | None) -> tuple[subprocess.Popen, int]:
    cmd = [sys.executable, "-m", "proctor", "serve", "--port", "0", "--workers", str(workers)]
    if max_queue is not None:
        cmd += ["--max-queue", str(max_queue)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    if not m:
        proc.kill()
        raise SystemExit(f"proctor serve did not start: {line}{proc.stderr.read()}")
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    return proc, int(m.group(1))


def get(port: int, path: str) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path)
    text = conn.getresponse().read().decode()
    conn.close()
    return text


def query(port: int, task_dir: Path, patch: str) -> tuple[int, float, dict]:
    body = json.dumps({"query": [PROMPT + f"```diff\n{patch}```"], "prompts": [PROMPT],
                       "labels": [str(task_dir)]}).encode()
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1800)
    conn.request("POST", "/get_reward", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    out = json.loads(resp.read() or b"null")
    conn.close()
    return resp.status, time.monotonic() - t0, out


class DockerPeak:
    """Peak of live containers owned by ``pid`` (sampled every 0.1 s)."""

    def __init__(self, pid: int) -> None:
        from proctor.sandbox import docker_client

        self.api = docker_client(timeout=30).api
        self.filters = {"label": ["org.proctor", f"org.proctor.owner_pid={pid}"]}
        self.peak, self._stop = 0, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, len(self.api.containers(all=True,
                                                               filters=self.filters)))
            time.sleep(0.1)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


def metric_values(text: str) -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def pct(data: list[float], q: int) -> float:
    if len(data) == 1:
        return data[0]
    return statistics.quantiles(sorted(data), n=100, method="inclusive")[q - 1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=6, help="concurrent one-query clients")
    ap.add_argument("--rounds", type=int, default=2, help="queries per client, one after "
                                                           "the other")
    ap.add_argument("--workers", type=int, default=2, help="proctor serve --workers")
    ap.add_argument("--max-queue", type=int, default=None,
                    help="proctor serve --max-queue (default: the server's, 4 x workers)")
    args = ap.parse_args()
    n = args.clients * args.rounds
    task_dir = Path(subprocess.run([sys.executable, str(ROOT / "examples/toolz/make_task.py")],
                                   check=True, capture_output=True, text=True
                                   ).stdout.split("\n")[-2])
    mk = load_make_task()
    prepared = prepare_task(task_dir)
    patches = variants(mk, task_dir, n)
    print(f"task {prepared.task.id}, {n} distinct reference variants; {args.clients} clients "
          f"x {args.rounds} rounds against proctor serve --workers {args.workers}; load "
          f"average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")

    half = n // 2
    t0 = time.monotonic()
    serial = [score(task_dir, p) for p in patches[:half]]
    serial_wall = time.monotonic() - t0

    proc, port = start_server(args.workers, args.max_queue)
    results: list[tuple[int, float, dict] | None] = [None] * n
    try:
        get(port, "/healthz")

        def client(c: int) -> None:
            for r in range(args.rounds):
                i = c * args.rounds + r
                results[i] = query(port, task_dir, patches[i])

        with DockerPeak(proc.pid) as docker_peak:
            t0 = time.monotonic()
            threads = [threading.Thread(target=client, args=(c,)) for c in range(args.clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.monotonic() - t0
        m = metric_values(get(port, "/metrics"))
    finally:
        proc.terminate()
        proc.wait(timeout=60)

    t0 = time.monotonic()  # the other half after the server's run: the same load drift
    serial += [score(task_dir, p) for p in patches[half:]]
    serial_wall += time.monotonic() - t0
    serial_rpm = n / serial_wall * 60
    print(f"serial proctor.score (half before, half after the server's run): {n} in "
          f"{serial_wall:.1f} s = {serial_rpm:.1f} rollouts/min "
          f"(errors: {sum(r.status != 'scored' for r in serial)})")
    ok = [r for r in results if r and r[0] == 200]
    lat = [r[1] for r in ok]
    rpm = len(ok) / wall * 60
    same = all(r is not None and r[0] == 200 and s.reward is not None
               and r[2]["rewards"][0] == s.reward for r, s in zip(results, serial, strict=True))
    codes = sorted({r[0] for r in results if r})
    peak_server = int(m[("proctor_sandboxes_peak", ())])
    print(f"proctor serve: {len(ok)}/{n} answered 200 (codes {codes}) in {wall:.1f} s = "
          f"{rpm:.1f} rollouts/min; client latency p50 {pct(lat, 50):.1f} s, "
          f"p95 {pct(lat, 95):.1f} s")
    print(f"  /metrics: scored {m.get(('proctor_rollouts_total', (('status', 'scored'),)), 0):g}"
          f", errors {m.get(('proctor_rollouts_total', (('status', 'error'),)), 0):g}, "
          f"p50 {m[('proctor_request_latency_seconds', (('quantile', '0.5'),))]:.1f} s, "
          f"p95 {m[('proctor_request_latency_seconds', (('quantile', '0.95'),))]:.1f} s, "
          f"rollouts/min (last minute) {m[('proctor_rollouts_per_minute', ())]:.1f}")
    print(f"  peak live sandboxes: {peak_server} (server's count), {docker_peak.peak} "
          f"(docker ps); workers {args.workers}")
    print(f"  rewards equal to the serial run's: {same}")
    print(f"throughput ratio, proctor serve over serial proctor score: {rpm / serial_rpm:.2f}")
    bad = max(peak_server, docker_peak.peak) > args.workers or not same
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
