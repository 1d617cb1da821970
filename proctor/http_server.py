"""``proctor serve``: the scorer over HTTP, standard library only (no extra to install).

Binds 127.0.0.1 by default; there is no authentication, so a non-loopback ``--host`` is
for trusted networks only. Endpoints (JSON in, JSON out):

``GET /healthz``
    ``{"status": "ok", "version": ...}``
``POST /v1/score``
    ``{"task": dir, "patch": diff | "completion": text or messages, "rollout_id"?,
    "group_id"?, "sample_index"?, "metadata"?}`` -> one reward record.
``POST /v1/score_batch``
    ``{"rollouts": [same objects...], "workers"?: n}`` -> ``{"records": [...]}`` in input
    order; an invalid rollout becomes an ``error`` record (kind ``bad_input``).
``POST /get_reward``
    OpenRLHF's remote reward protocol: ``{"query": [...], "prompts": [...], "labels":
    [...]}`` -> ``{"rewards": [...], "scores": [...], "extra_logs": {...}}`` (see
    :mod:`proctor.rl.openrlhf`).

Errors: 400 body is not JSON or not an object, 404 unknown path, 405 wrong method, 411 no
Content-Length, 413 body over ``max_body`` bytes or more than ``max_rollouts`` rollouts,
422 a field is missing or has the wrong type; body ``{"error": {"status", "message"}}``.
Patches are accepted inline only (never as a server-side path).
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from pydantic import BaseModel, ConfigDict, ValidationError

from proctor.harness.batch import BatchOptions
from proctor.record import RewardRecord
from proctor.version import __version__

MAX_BODY = 64 * 1024 * 1024
MAX_ROLLOUTS = 4096


class ScoreRequest(BaseModel):
    """One rollout over HTTP: ``patch`` (diff text) or ``completion`` (searched for a
    fenced diff), not both."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    task: str
    patch: str | None = None
    completion: str | list | dict | None = None
    rollout_id: str | None = None
    group_id: str | None = None
    sample_index: int | None = None
    metadata: dict | None = None


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rollouts: list[dict]
    workers: int | None = None


class RewardRequest(BaseModel):
    """OpenRLHF ``remote_rm_fn`` payload (extra keys some versions send are ignored)."""

    model_config = ConfigDict(extra="ignore")

    query: list[str]
    prompts: list[str]
    labels: list


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


# Scoring, module level so tests can replace it.


def score_requests(reqs: list[ScoreRequest], workers: int | None) -> list[RewardRecord]:
    from proctor.rl.completions import Completion, score_completions

    entries = [Completion(task=r.task, completion=r.completion, patch=r.patch,
                          rollout_id=r.rollout_id, group_id=r.group_id,
                          sample_index=r.sample_index) for r in reqs]
    records = score_completions(entries, BatchOptions(workers=workers))
    for r, rec in zip(reqs, records, strict=True):
        rec.metadata = r.metadata
    return records


def get_reward(req: RewardRequest, workers: int | None) -> dict:
    from proctor.rl.openrlhf import score_queries

    return score_queries(req.query, req.prompts, req.labels, workers=workers)


def _validate(model: type[BaseModel], body: dict) -> BaseModel:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(x) for x in first["loc"]) or "(body)"
        raise HttpError(422, f"field '{field}': {first['msg']}") from None


def _score_request(body: dict) -> ScoreRequest:
    req = _validate(ScoreRequest, body)
    if (req.patch is None) == (req.completion is None):
        raise HttpError(422, "exactly one of 'patch' or 'completion' is required")
    return req


class Handler(BaseHTTPRequestHandler):
    server_version = f"proctor/{__version__}"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args) -> None:  # one line per request on stderr
        if self.server.log_requests:
            sys.stderr.write(f"[proctor serve] {self.address_string()} {fmt % args}\n")

    def _send(self, status: int, payload: dict | list) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"error": {"status": status, "message": message}})

    def _body(self) -> dict:
        length = self.headers.get("Content-Length")
        if length is None:
            raise HttpError(411, "Content-Length required")
        try:
            n = int(length)
        except ValueError:
            raise HttpError(400, "Content-Length is not a number") from None
        if n < 0 or n > self.server.max_body:
            self.close_connection = True  # the unread body must not be parsed as a request
            raise HttpError(413, f"body of {n} bytes is over the {self.server.max_body}-byte "
                                 "limit")
        raw = self.rfile.read(n)
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise HttpError(400, f"body is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise HttpError(400, f"body must be a JSON object, got {type(body).__name__}")
        return body

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        if self.path == "/healthz":
            self._send(200, {"status": "ok", "version": __version__})
        elif self.path in ROUTES:
            self._error(405, f"{self.path} takes POST")
        else:
            self._error(404, f"no such endpoint: {self.path}")

    def do_POST(self) -> None:  # noqa: N802
        route = ROUTES.get(self.path)
        try:
            if route is None:
                if self.path == "/healthz":
                    raise HttpError(405, "/healthz takes GET")
                raise HttpError(404, f"no such endpoint: {self.path}")
            self._send(200, route(self.server, self._body()))
        except HttpError as exc:
            self._error(exc.status, str(exc))
        except Exception as exc:  # noqa: BLE001 - a server must answer, not die
            self._error(500, f"{type(exc).__name__}: {exc}")


def _route_score(server, body: dict) -> dict:
    req = _score_request(body)
    return json.loads(score_requests([req], 1)[0].to_json())


def _route_score_batch(server, body: dict) -> dict:
    req = _validate(BatchRequest, body)
    if len(req.rollouts) > server.max_rollouts:
        raise HttpError(413, f"{len(req.rollouts)} rollouts, over the limit of "
                             f"{server.max_rollouts} per request")
    from proctor.harness.rollout_io import BatchItem, bad_input_record

    valid, out = [], [None] * len(req.rollouts)
    for i, obj in enumerate(req.rollouts):
        try:
            valid.append((i, _score_request(obj)))
        except HttpError as exc:
            rid = obj.get("rollout_id") if isinstance(obj.get("rollout_id"), str) else None
            out[i] = bad_input_record(BatchItem(i, None, problem=str(exc), raw_id=rid))
    records = score_requests([r for _, r in valid], req.workers or server.workers)
    for (i, _), rec in zip(valid, records, strict=True):
        out[i] = rec
    return {"records": [json.loads(r.to_json()) for r in out]}


def _route_get_reward(server, body: dict) -> dict:
    req = _validate(RewardRequest, body)
    if not len(req.query) == len(req.prompts) == len(req.labels):
        raise HttpError(422, "query, prompts and labels must have the same length")
    if len(req.query) > server.max_rollouts:
        raise HttpError(413, f"{len(req.query)} queries, over the limit of "
                             f"{server.max_rollouts} per request")
    try:
        return get_reward(req, server.workers)
    except ValueError as exc:  # a label without a task
        raise HttpError(422, str(exc)) from None


ROUTES = {"/v1/score": _route_score, "/v1/score_batch": _route_score_batch,
          "/get_reward": _route_get_reward}


class ProctorServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], *, workers: int | None = None,
                 max_body: int = MAX_BODY, max_rollouts: int = MAX_ROLLOUTS,
                 log_requests: bool = True) -> None:
        super().__init__(address, Handler)
        self.workers, self.max_body, self.max_rollouts = workers, max_body, max_rollouts
        self.log_requests = log_requests


def make_server(host: str = "127.0.0.1", port: int = 8765, **kw) -> ProctorServer:
    """A bound server (``port=0`` picks a free port: ``server.server_address[1]``)."""
    return ProctorServer((host, port), **kw)


def serve_in_thread(server: ProctorServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread

