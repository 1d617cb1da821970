"""``proctor serve`` under trainer load, with real Docker scoring of the toolz example over
real HTTP on 127.0.0.1 (a uvicorn server in a thread of this process, so its sandboxes
carry this process's owner label): the server-wide cap on live sandboxes, 503 with
Retry-After when the queue is full, cancellation when a client goes away, per-item error
records in a 200, and the metrics."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import socket
import threading
import time
import uuid

import pytest

import proctor.http_server as hs
from proctor.harness.pipeline import slots
from proctor.sandbox import ownership

pytestmark = pytest.mark.docker
OWNER = ["org.proctor", f"org.proctor.owner_pid={os.getpid()}"]


@pytest.fixture
def serve():
    """``serve(**kw)`` starts a server (stopped after the test)."""
    started = []

    def start(**kw):
        srv = hs.make_server(port=0, log_requests=False, **kw)
        srv.start()
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.shutdown()
        srv.server_close()
    slots._max = None


@pytest.fixture(scope="module")
def variants(toolz_make_task, toolz_task):
    """``variants(n)``: n distinct reference fixes (a unique comment line in ``getter``,
    free of diff cost), so that the result cache never answers for them."""
    mk = toolz_make_task
    head = "def getter(index):\n"

    def make(n: int) -> list[str]:
        out = []
        for _ in range(n):
            edits = {}
            for path, (old, new) in mk.PATCHES["reference"].items():
                if path == mk.BUGGY_FILE:
                    new = new.replace(head, f"{head}    # variant {uuid.uuid4().hex}\n", 1)
                edits[path] = (old, new)
            out.append(mk.make_patch(toolz_task / "repo", edits).decode())
        return out

    return make


@pytest.fixture(scope="module")
def prepared(toolz_task, docker_ready):
    """The task's baseline, computed before any timing."""
    from proctor.harness.batch import prepare_task

    return prepare_task(toolz_task)


def post(port: int, path: str, body: dict, timeout: float = 600):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST", path, body=json.dumps(body).encode(),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    out = resp.status, dict(resp.getheaders()), json.loads(resp.read() or b"null")
    conn.close()
    return out


def one_query(task, patch: str) -> dict:
    """OpenRLHF's shape: one sample per request, the response after the prompt."""
    prompt = "Fix getter.\n"
    return {"query": [prompt + f"```diff\n{patch}```"], "prompts": [prompt],
            "labels": [str(task)]}


def live_containers(client) -> int:
    # the low-level list: no per-container inspection racing with removals
    return len(client.api.containers(all=True, filters={"label": OWNER}))


class Watch:
    """Peak of this process's live sandbox containers (``docker ps``), sampled."""

    def __init__(self, client) -> None:
        self.client, self.peak, self._stop = client, 0, threading.Event()

    def __enter__(self):
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, live_containers(self.client))
            time.sleep(0.1)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


def metrics(port: int) -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_six_one_query_clients_share_two_sandbox_slots(serve, prepared, toolz_task, variants,
                                                       docker_engine):
    srv = serve(workers=2)
    port = srv.server_address[1]
    patches = variants(6)
    replies = [None] * 6

    def client(i):
        replies[i] = post(port, "/get_reward", one_query(toolz_task, patches[i]))

    with Watch(docker_engine) as watch:
        threads = [threading.Thread(target=client, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert [r[0] for r in replies] == [200] * 6
    assert all(r[2]["rewards"] == [pytest.approx(0.998)] for r in replies), replies
    assert watch.peak <= 2 and ownership.live_sandboxes()[1] <= 2
    assert slots.stats()["peak"] <= 2
    m = metrics(port)
    assert m[("proctor_rollouts_total", (("status", "scored"),))] == 6
    assert m[("proctor_sandboxes_peak", ())] <= 2
    assert m[("proctor_rollouts_in_flight", ())] == 0 and m[("proctor_rollouts_queued", ())] == 0
    assert m[("proctor_rollouts_per_minute", ())] > 0
    p50 = m[("proctor_request_latency_seconds", (("quantile", "0.5"),))]
    p95 = m[("proctor_request_latency_seconds", (("quantile", "0.95"),))]
    assert 0 < p50 <= p95
    assert m[("proctor_request_seconds_count", (("route", "/get_reward"),))] == 6


def test_full_queue_gets_503_with_retry_after(serve, prepared, toolz_task, variants):
    srv = serve(workers=1, max_queue=1)
    port = srv.server_address[1]
    patches = variants(2)
    replies = []
    threads = [threading.Thread(target=lambda p=p: replies.append(
        post(port, "/v1/score", {"task": str(toolz_task), "patch": p}))) for p in patches]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while srv.service.pending < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    status, headers, body = post(port, "/get_reward", one_query(toolz_task, patches[0]))
    assert status == 503 and "queue full" in body["error"]["message"]
    assert int(headers["retry-after"]) >= 1
    for t in threads:
        t.join()
    assert sorted(r[0] for r in replies) == [200, 200]
    assert all(r[2]["reward"] == pytest.approx(0.998) for r in replies)
    # room again: admitted
    status, _, body = post(port, "/get_reward", one_query(toolz_task, patches[0]))
    assert status == 200 and body["rewards"] == [pytest.approx(0.998)]
    assert metrics(port)[("proctor_http_requests_total",
                          (("code", "503"), ("route", "/get_reward")))] == 1


def _send_raw(port: int, path: str, body: dict) -> socket.socket:
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                 f"\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
    return sock


def test_client_gone_cancels_its_rollouts(serve, prepared, toolz_task, variants,
                                          docker_engine):
    from proctor.harness.batch import ResultCache, result_key

    srv = serve(workers=1, max_queue=4)
    port = srv.server_address[1]
    running, queued = variants(2)
    a = _send_raw(port, "/get_reward", one_query(toolz_task, running))
    deadline = time.monotonic() + 60
    while live_containers(docker_engine) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live_containers(docker_engine) >= 1, "the first request never started a sandbox"
    b = _send_raw(port, "/v1/score", {"task": str(toolz_task), "patch": queued})
    while srv.service.pending < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    a.close()
    b.close()
    deadline = time.monotonic() + 30
    while (srv.service.pending or live_containers(docker_engine)) \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    assert live_containers(docker_engine) == 0 and srv.service.pending == 0
    assert slots.stats()["in_use"] == 0 and ownership.live_sandboxes()[0] == 0
    cache = ResultCache()
    for patch in (running, queued):
        key = result_key(hashlib.sha256(patch.encode()).hexdigest(),
                         prepared.task.fingerprint, prepared.image_id)
        assert cache.get(key) is None
    assert metrics(port)[("proctor_requests_cancelled_total", ())] == 2
    # the server still scores, and the cancelled patch is measured afresh (no cache hit)
    status, _, rec = post(port, "/v1/score", {"task": str(toolz_task), "patch": running})
    assert status == 200 and rec["reward"] == pytest.approx(0.998)
    assert "cache_hit" not in rec["timing"]


def test_item_errors_inside_a_200(serve, prepared, toolz_task, toolz_patches, tmp_path):
    srv = serve(workers=2)
    port = srv.server_address[1]
    ref = toolz_patches["reference"].decode()
    missing = str(tmp_path / "no-such-task")
    status, _, out = post(port, "/get_reward", {
        "query": [f"```diff\n{ref}```", "x", f"```diff\n{ref}```"], "prompts": ["", "", ""],
        "labels": [str(toolz_task), '{"no_task": 1}', missing]})
    assert status == 200, out
    assert out["rewards"] == [pytest.approx(0.998), 0.0, 0.0]
    assert out["extra_logs"]["proctor_valid"] == [1.0, 0.0, 0.0]
    status, _, out = post(port, "/v1/score_batch", {"rollouts": [
        {"task": str(toolz_task), "patch": ref, "rollout_id": "ok"},
        {"task": missing, "patch": ref, "rollout_id": "missing"},
        {"task": str(toolz_task), "rollout_id": "neither"}]})
    assert status == 200
    recs = {r["rollout_id"]: r for r in out["records"]}
    assert recs["ok"]["reward"] == pytest.approx(0.998)
    assert recs["missing"]["status"] == "error" and recs["missing"]["reward"] is None
    assert recs["missing"]["error"]["kind"] == "task_config"
    assert recs["neither"]["error"]["kind"] == "bad_input"
    m = metrics(port)
    # /get_reward judges its labels as the OpenRLHF adapter does: a label naming no task
    # directory is bad input (2); /v1/score_batch loads the task: task_config (1)
    assert m[("proctor_rollout_errors_total", (("kind", "task_config"),))] == 1
    assert m[("proctor_rollout_errors_total", (("kind", "bad_input"),))] == 3


def test_body_over_the_limit_is_413_naming_it(serve):
    srv = serve(workers=1, max_body=65536)
    status, _, out = post(srv.server_address[1], "/get_reward",
                          {"query": ["x" * 100_000], "prompts": [""], "labels": ["t"]})
    assert status == 413 and "over the 65536-byte limit" in out["error"]["message"]
