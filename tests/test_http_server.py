"""``proctor serve``: routes, limits and 4xx answers over real HTTP on 127.0.0.1 (a real
uvicorn server in a thread; scoring replaced by a fake), plus one real scoring round trip on
the toolz example and the CLI in a subprocess. Load, cancellation and metrics under real
scoring: tests/test_serve_load.py."""

from __future__ import annotations

import http.client
import json
import signal
import socket

import pytest

import proctor.http_server as hs
from proctor.harness.pipeline import slots
from proctor.record import EnvInfo, RewardRecord


@pytest.fixture
def server():
    srv = hs.make_server(port=0, workers=2, max_body=4096, max_rollouts=3,
                         log_requests=False)
    srv.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    slots._max = None  # back to the environment's default for later tests


@pytest.fixture
def fake_scoring(monkeypatch):
    seen = []

    def score_requests(reqs, workers):
        seen.extend(reqs)
        return [RewardRecord(task_id="t", rollout_id=r.rollout_id or "x", status="scored",
                             reward=0.5, env=EnvInfo(proctor_version="t")) for r in reqs]

    def reward_records(req, workers):
        seen.append(req)
        return [RewardRecord(task_id="t", rollout_id="x", status="scored", reward=0.1,
                             env=EnvInfo(proctor_version="t")) for _ in req.query]

    monkeypatch.setattr(hs, "score_requests", score_requests)
    monkeypatch.setattr(hs, "reward_records", reward_records)
    return seen


def call(server, method, path, body=None, raw=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=600)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    conn.request(method, path, body=data, headers=headers or {})
    resp = conn.getresponse()
    payload = json.loads(resp.read() or b"null")
    conn.close()
    return resp.status, payload


def test_healthz_binds_loopback(server):
    assert server.server_address[0] == "127.0.0.1"
    assert call(server, "GET", "/healthz") == (200, {"status": "ok", "version": "0.1.0"})


def test_score_and_batch_routes(server, fake_scoring):
    status, rec = call(server, "POST", "/v1/score", {"task": "/t", "patch": "d",
                                                     "rollout_id": "r1"})
    assert status == 200 and rec["reward"] == 0.5 and rec["rollout_id"] == "r1"
    status, out = call(server, "POST", "/v1/score_batch", {"rollouts": [
        {"task": "/t", "completion": "x", "rollout_id": "a"},
        {"task": "/t", "rollout_id": "bad"},
        {"task": "/t", "patch": "y", "rollout_id": "c"}]})
    assert status == 200 and [r["rollout_id"] for r in out["records"]] == ["a", "bad", "c"]
    assert out["records"][1]["error"]["kind"] == "bad_input"
    assert "exactly one of 'patch' or 'completion'" in out["records"][1]["error"]["message"]
    status, out = call(server, "POST", "/get_reward",
                       {"query": ["q"], "prompts": ["p"], "labels": ["/t"]})
    assert status == 200 and out["rewards"] == [0.1] and out["scores"] == [0.1]
    assert out["extra_logs"]["proctor_valid"] == [1.0]


@pytest.mark.parametrize("method,path,body,raw,status,message", [
    ("POST", "/v1/score", None, b"{nope", 400, "not valid JSON"),
    ("POST", "/v1/score", None, b"[1]", 400, "must be a JSON object"),
    ("POST", "/v1/score", {"patch": "d"}, None, 422, "field 'task'"),
    ("POST", "/v1/score", {"task": "/t", "patch": "d", "pach": 1}, None, 422, "field 'pach'"),
    ("POST", "/v1/score", {"task": "/t"}, None, 422, "exactly one of"),
    ("POST", "/v1/score", {"task": "/t", "completion": "c", "tool_call_parser": "xml"}, None,
     422, "unknown tool-call parser 'xml'"),
    ("POST", "/v1/score", None, b"x" * 5000, 413, "over the 4096-byte limit"),
    ("POST", "/v1/score_batch", {"rollouts": [{}] * 4}, None, 413, "over the limit of 3"),
    ("POST", "/get_reward", {"query": ["q"], "prompts": [], "labels": []}, None, 422,
     "same length"),
    ("POST", "/get_reward", {"query": "q", "prompts": ["p"], "labels": ["l"]}, None, 422,
     "field 'query'"),
    ("POST", "/v2/nothing", {}, None, 404, "no such endpoint"),
    ("GET", "/v1/score", None, None, 405, "takes POST"),
    ("POST", "/healthz", {}, None, 405, "takes GET"),
    ("POST", "/metrics", {}, None, 405, "takes GET"),
])
def test_malformed_requests_get_a_clear_4xx(server, fake_scoring, method, path, body, raw,
                                            status, message):
    got, payload = call(server, method, path, body, raw)
    assert got == status and message in payload["error"]["message"]
    assert payload["error"]["status"] == status
    assert fake_scoring == []


def test_bad_labels_are_error_records_in_a_200(server):
    """Label problems found before any scoring: each an error record for its query."""
    status, out = call(server, "POST", "/get_reward", {
        "query": ["a", "b", "c"], "prompts": ["", "", ""],
        "labels": ["{not json", '{"patch": "x"}', 7]})
    assert status == 200 and out["rewards"] == [0.0] * 3 and out["scores"] == [0.0] * 3
    assert out["extra_logs"]["proctor_valid"] == [0.0] * 3


def test_chunked_body_over_the_limit_is_413(server):
    sock = socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=30)
    chunk = b"x" * 3000
    sock.sendall(b"POST /v1/score HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                 + b"%x\r\n%s\r\n" % (len(chunk), chunk) * 2 + b"0\r\n\r\n")
    sock.shutdown(socket.SHUT_WR)
    reply = b""
    while chunk := sock.recv(65536):
        reply += chunk
    sock.close()
    reply = reply.decode()
    assert reply.startswith("HTTP/1.1 413") and "over the 4096-byte limit" in reply


def test_missing_content_length_is_411(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
    conn.putrequest("POST", "/v1/score")
    conn.endheaders()
    resp = conn.getresponse()
    assert resp.status == 411
    conn.close()


def test_metrics_parse_as_prometheus_text(server, fake_scoring):
    from prometheus_client.parser import text_string_to_metric_families

    call(server, "POST", "/v1/score", {"task": "/t", "patch": "d"})
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
    conn.request("GET", "/metrics")
    resp = conn.getresponse()
    text = resp.read().decode()
    assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/plain")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for fam in text_string_to_metric_families(text) for s in fam.samples}
    assert samples[("proctor_rollouts_total", (("status", "scored"),))] == 1
    assert samples[("proctor_sandbox_slots", ())] == 2
    assert samples[("proctor_rollouts_in_flight", ())] == 0
    assert samples[("proctor_rollouts_queued", ())] == 0
    assert samples[("proctor_rollouts_per_minute", ())] > 0
    assert samples[("proctor_request_latency_seconds", (("quantile", "0.95"),))] >= 0
    assert samples[("proctor_request_seconds_count", (("route", "/v1/score"),))] == 1
    assert ("proctor_sandboxes_peak", ()) in samples


@pytest.mark.docker
def test_real_scoring_round_trip(server, toolz_task, toolz_patches):
    ref = toolz_patches["reference"].decode()
    status, rec = call(server, "POST", "/v1/score", {"task": str(toolz_task), "patch": ref,
                                                     "rollout_id": "http-ref",
                                                     "metadata": {"k": 1}})
    assert status == 200 and rec["reward"] == pytest.approx(0.998)
    assert rec["metadata"] == {"k": 1}
    status, out = call(server, "POST", "/get_reward", {
        "query": ["P" + f"```diff\n{ref}```", "Pno diff"], "prompts": ["P", "P"],
        "labels": [str(toolz_task)] * 2})
    assert status == 200 and out["rewards"] == [pytest.approx(0.998), 0.0]
    assert out["extra_logs"]["proctor_no_patch"] == [0.0, 1.0]


def test_cli_serve_starts_on_loopback_and_answers(tmp_path):
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen([sys.executable, "-m", "proctor", "serve", "--port", "0",
                             "--workers", "1"], cwd=root, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+) \(1 sandbox slots, queue 4; live page at /\)",
                      line)
        assert m, line
        conn = http.client.HTTPConnection("127.0.0.1", int(m.group(1)), timeout=30)
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        proc.terminate()  # uvicorn shuts down, then SIGTERM's default action ends it
        assert proc.wait(timeout=30) in (0, -signal.SIGTERM)


def test_cli_serve_rejects_a_bad_sandbox_cap(monkeypatch):
    import subprocess
    import sys

    monkeypatch.setenv("PROCTOR_MAX_SANDBOXES", "many")
    out = subprocess.run([sys.executable, "-m", "proctor", "serve", "--port", "0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "PROCTOR_MAX_SANDBOXES must be a whole number" in out.stderr


def test_live_page_redraws_from_v1_live_without_reloading(server, fake_scoring):
    """``GET /`` in headless Chromium: the counts and recent rollouts change as records are
    returned, with no reload (a value set on the page survives) and no console error."""
    import time

    from tests.report_browser import chromium, console_errors

    status, live = call(server, "GET", "/v1/live")
    assert status == 200 and live["totals"] == {"scored": 0, "error": 0}
    assert live["recent"] == [] and live["slots"] == 2 and live["in_flight"] == 0

    def shown(driver):  # one read: the page redraws its elements every 2 s
        return driver.execute_script("""return {
          kpis: Object.fromEntries([...document.querySelectorAll('[data-kpi]')]
            .map(d => [d.dataset.kpi, d.querySelector('b').textContent])),
          rows: [...document.querySelectorAll('#recent tbody tr')]
            .map(tr => [...tr.children].map(td => td.textContent)),
          errors: document.getElementById('errors').textContent}""")

    with chromium() as driver:
        driver.get(f"http://127.0.0.1:{server.server_address[1]}/")
        for _ in range(100):
            if driver.execute_script("return document.body.dataset.ready") == "1":
                break
            time.sleep(0.05)
        page = shown(driver)
        assert page["kpis"]["scored"] == "0" and page["kpis"]["errors"] == "0"
        driver.execute_script("window.marker = 42")
        call(server, "POST", "/v1/score_batch", {"rollouts": [
            {"task": "/t", "completion": "x", "rollout_id": "a"},
            {"task": "/t", "rollout_id": "bad"},
            {"task": "/t", "patch": "y", "rollout_id": "c"}]})
        deadline = time.monotonic() + 10
        while shown(driver)["kpis"]["errors"] != "1" and time.monotonic() < deadline:
            time.sleep(0.1)
        page = shown(driver)
        assert page["kpis"]["scored"] == "2" and page["kpis"]["errors"] == "1"
        assert sorted(r[1] for r in page["rows"]) == ["a", "bad", "c"]
        bad = next(r for r in page["rows"] if r[1] == "bad")
        assert bad[3] == "error" and bad[6].startswith("bad_input: ")
        assert page["errors"] == "bad_input: 1"
        assert driver.execute_script("return window.marker") == 42  # never reloaded
        assert console_errors(driver) == []
    live = call(server, "GET", "/v1/live")[1]
    assert live["totals"] == {"scored": 2, "error": 1} and live["error_kinds"] == {
        "bad_input": 1}
    assert [r["rollout_id"] for r in live["recent"]][0] in ("a", "bad", "c")
