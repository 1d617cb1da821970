"""``proctor serve``: routes, limits and 4xx answers (scoring replaced by a fake), plus one
real scoring round trip on the toolz example."""

from __future__ import annotations

import http.client
import json

import pytest

import proctor.http_server as hs
from proctor.record import EnvInfo, RewardRecord


@pytest.fixture
def server():
    srv = hs.make_server(port=0, max_body=4096, max_rollouts=3, log_requests=False)
    hs.serve_in_thread(srv)
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def fake_scoring(monkeypatch):
    seen = []

    def score_requests(reqs, workers):
        seen.extend(reqs)
        return [RewardRecord(task_id="t", rollout_id=r.rollout_id or "x", status="scored",
                             reward=0.5, env=EnvInfo(proctor_version="t")) for r in reqs]

    monkeypatch.setattr(hs, "score_requests", score_requests)
    monkeypatch.setattr(hs, "get_reward", lambda req, workers: {
        "rewards": [0.1] * len(req.query), "scores": [0.1] * len(req.query), "extra_logs": {}})
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
    assert status == 200 and out["rewards"] == [0.1]


@pytest.mark.parametrize("method,path,body,raw,status,message", [
    ("POST", "/v1/score", None, b"{nope", 400, "not valid JSON"),
    ("POST", "/v1/score", None, b"[1]", 400, "must be a JSON object"),
    ("POST", "/v1/score", {"patch": "d"}, None, 422, "field 'task'"),
    ("POST", "/v1/score", {"task": "/t", "patch": "d", "pach": 1}, None, 422, "field 'pach'"),
    ("POST", "/v1/score", {"task": "/t"}, None, 422, "exactly one of"),
    ("POST", "/v1/score", None, b"x" * 5000, 413, "over the 4096-byte limit"),
    ("POST", "/v1/score_batch", {"rollouts": [{}] * 4}, None, 413, "over the limit of 3"),
    ("POST", "/get_reward", {"query": ["q"], "prompts": [], "labels": []}, None, 422,
     "same length"),
    ("POST", "/v2/nothing", {}, None, 404, "no such endpoint"),
    ("GET", "/v1/score", None, None, 405, "takes POST"),
    ("POST", "/healthz", {}, None, 405, "takes GET"),
])
def test_malformed_requests_get_a_clear_4xx(server, fake_scoring, method, path, body, raw,
                                            status, message):
    got, payload = call(server, method, path, body, raw)
    assert got == status and message in payload["error"]["message"]
    assert fake_scoring == []


def test_missing_content_length_is_411(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
    conn.putrequest("POST", "/v1/score")
    conn.endheaders()
    resp = conn.getresponse()
    assert resp.status == 411
    conn.close()


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
    proc = subprocess.Popen([sys.executable, "-m", "proctor", "serve", "--port", "0"],
                            cwd=root, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert m, line
        conn = http.client.HTTPConnection("127.0.0.1", int(m.group(1)), timeout=30)
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
