"""``proctor serve``: the scorer over HTTP, Starlette on uvicorn (``pip install
'proctor[serve]'``).

Binds 127.0.0.1 by default; there is no authentication, so a non-loopback ``--host`` is
for trusted networks only. Endpoints (JSON in, JSON out):

``GET /``
    The live page: rollouts in flight and queued, rollouts per minute, recent rewards and
    errors, redrawn every 2 s from ``GET /v1/live`` without reloading.
``GET /v1/live``
    That state as JSON (:meth:`proctor.http_metrics.ServeMetrics.live`).
``GET /healthz``
    ``{"status": "ok", "version": ...}``
``GET /metrics``
    Prometheus text format (see :mod:`proctor.http_metrics`).
``POST /v1/score``
    ``{"task": dir, "patch": diff | "completion": text or messages, "rollout_id"?,
    "group_id"?, "sample_index"?, "metadata"?}`` -> one reward record.
``POST /v1/score_batch``
    ``{"rollouts": [same objects...], "workers"?: n}`` -> ``{"records": [...]}`` in input
    order; an invalid rollout becomes an ``error`` record (kind ``bad_input``), a missing
    task an ``error`` record (kind ``task_config``): that item only, the reply is a 200.
``POST /get_reward``
    OpenRLHF's remote reward protocol: ``{"query": [...], "prompts": [...], "labels":
    [...]}`` -> ``{"rewards": [...], "scores": [...], "extra_logs": {...}}`` (see
    :mod:`proctor.rl.openrlhf`); a bad label or missing task is an error for that item
    only: reward 0.0, ``extra_logs["proctor_valid"]`` 0.0.

Capacity (one pool for the whole server): ``workers`` sandbox slots
(:func:`proctor.harness.pipeline.slots.configure`) that every rollout of every request waits for.
A request is admitted while the rollouts admitted and not finished, its own included, stay
within ``workers + max_queue`` (a request finding none pending is always admitted);
otherwise it gets a 503 with ``Retry-After`` (seconds). A client that goes away before its
reply is cancelled (:mod:`proctor.harness.pipeline.cancel`): its rollouts not started never start,
its sandboxes are removed, nothing of it enters the result cache. With ``warm`` (``--warm
N``), N sandboxes per kind are made ahead and kept waiting for the server's life
(:mod:`proctor.sandbox.warm_pool`), so a rollout does not wait for its containers to start;
they are live containers beyond the ``workers`` in use.

Errors: 400 body is not JSON or not an object, 404 unknown path, 405 wrong method, 411 no
Content-Length (and not chunked), 413 body over ``max_body`` bytes (the limit is named) or
more than ``max_rollouts`` rollouts, 422 a field is missing or has the wrong type (of the
request itself: a batch's bad item is an error record), 503 queue full; body ``{"error":
{"status", "message"}}``. Patches are accepted inline only (never as a server-side path).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import math
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import uvicorn
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from proctor.harness.batch import BatchOptions
from proctor.harness.pipeline import cancel, slots
from proctor.http_metrics import CONTENT_TYPE, ServeMetrics
from proctor.record import RewardRecord
from proctor.report import live_page
from proctor.sandbox import cleanup, ownership, warm_sandboxes
from proctor.version import __version__

MAX_BODY = 64 * 1024 * 1024
MAX_ROLLOUTS = 4096
#: Retry-After (s) when no request has finished yet to estimate from.
DEFAULT_RETRY_AFTER_S = 10
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


class ScoreRequest(BaseModel):
    """One rollout over HTTP: ``patch`` (diff text) or ``completion`` (searched for the
    patch, :mod:`proctor.rl.extract`), not both; ``reasoning_parser`` / ``tool_call_parser``:
    the model family's syntaxes, vLLM's parser names (default: the server's
    ``PROCTOR_REASONING_PARSER`` / ``PROCTOR_TOOL_CALL_PARSER``, else ``auto``; an unknown
    name is the request's error)."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    task: str
    patch: str | None = None
    completion: str | list | dict | None = None
    rollout_id: str | None = None
    group_id: str | None = None
    sample_index: int | None = None
    metadata: dict | None = None
    reasoning_parser: str | None = None
    tool_call_parser: str | None = None

    @model_validator(mode="after")
    def _known_parsers(self) -> ScoreRequest:
        from proctor.rl.completions import parser_options

        parser_options(self.reasoning_parser, self.tool_call_parser)  # ValueError: a 422
        return self


class BatchRequest(BaseModel):
    """``POST /v1/score_batch``: ``rollouts``, each an object validated on its own like a
    :class:`ScoreRequest` (a bad one is an error record in its place, not a 422);
    ``workers``: concurrent rollouts wanted, at most the server's."""

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
    """Ends a request with HTTP ``status`` and the JSON error body ``{"error": {"status",
    "message"}}``; ``headers`` are added to the response (e.g. ``Retry-After``). Raised for
    one item of a batch, it makes that item's error record instead."""

    def __init__(self, status: int, message: str, headers: dict | None = None) -> None:
        super().__init__(message)
        self.status, self.headers = status, headers or {}


class ClientGone(Exception):
    """The client disconnected before its reply: the request was cancelled."""


# --------------------------------------------------------------------------- scoring
# Module level so tests can replace them. Called in a worker thread, inside the request's
# cancel scope.


def score_requests(reqs: list[ScoreRequest], workers: int | None) -> list[RewardRecord]:
    """One record per request, in order (never raises for a bad item)."""
    from proctor.rl import Completion, score_completions
    from proctor.rl.completions import parser_options

    entries = [Completion(task=r.task, completion=r.completion, patch=r.patch,
                          rollout_id=r.rollout_id, group_id=r.group_id,
                          sample_index=r.sample_index,
                          **parser_options(r.reasoning_parser, r.tool_call_parser))
               for r in reqs]
    records = score_completions(entries, BatchOptions(workers=workers))
    for r, rec in zip(reqs, records, strict=True):
        rec.metadata = r.metadata
    return records


def reward_records(req: RewardRequest, workers: int | None) -> list[RewardRecord]:
    """One record per OpenRLHF query, in order
    (:func:`proctor.rl.openrlhf.score_records`): a label that names no task is an error
    record (kind ``bad_input``) for that query only."""
    from proctor.rl.openrlhf import score_records

    return score_records(req.query, req.prompts, req.labels, workers)


def openrlhf_reply(records: list[RewardRecord]) -> dict:
    """``{"rewards", "scores", "extra_logs"}`` as :func:`proctor.rl.openrlhf.score_queries`
    returns them (error records: reward 0.0, ``proctor_valid`` 0.0). Pure."""
    from proctor.rl.openrlhf import reply

    return reply(records)


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


# --------------------------------------------------------------------------- the service


class Service:
    """State shared by every request: the capacity (slots, admission), the worker threads,
    the open cancel scopes, the metrics and ``warm`` sandboxes made ahead and kept waiting
    (default none: they are live containers beyond the ``workers`` in use;
    :mod:`proctor.sandbox.warm_pool`).

    Raises:
        ValueError: ``workers`` below 1 or ``max_queue`` below 0.
        WarmConfigError: ``warm`` below 0.
    """

    def __init__(self, *, workers: int | None = None, max_queue: int | None = None,
                 max_body: int = MAX_BODY, max_rollouts: int = MAX_ROLLOUTS,
                 log_requests: bool = True, warm: int | None = None) -> None:
        self.workers = workers or slots.default_max()
        self.max_queue = 4 * self.workers if max_queue is None else max_queue
        if self.workers < 1 or self.max_queue < 0:
            raise ValueError("workers must be >= 1 and max_queue >= 0")
        self.max_body, self.max_rollouts = max_body, max_rollouts
        self.log_requests = log_requests
        slots.configure(self.workers)
        slots.reset_peak()
        ownership.reset_live_peak()
        # sandboxes made ahead and kept waiting for the server's life (beyond the slots' cap
        # on sandboxes in use: opt-in)
        self.warm = warm or 0
        self._warm = ExitStack()
        self._warm.enter_context(warm_sandboxes(self.warm))
        # Every admitted request gets a thread at once (its rollouts wait for slots there).
        self.pool = ThreadPoolExecutor(max_workers=self.workers + self.max_queue + 1,
                                       thread_name_prefix="proctor-serve")
        self._lock = threading.Lock()
        self.pending = 0  # rollouts admitted and not finished
        self._scopes: set[cancel.Scope] = set()
        self.metrics = ServeMetrics(self._gauges)

    def _gauges(self) -> dict[str, int]:
        s = slots.stats()
        live, peak = ownership.live_sandboxes()
        with self._lock:
            pending = self.pending
        return {"in_flight": s["in_use"], "queued": max(0, pending - s["in_use"]),
                "slots": s["max"], "live": live, "peak": peak}

    def _admit(self, n: int) -> None:
        with self._lock:
            if self.pending and self.pending + n > self.workers + self.max_queue:
                queued = self.pending - min(self.pending, self.workers)
                raise HttpError(503, f"queue full: {self.pending} rollouts admitted for "
                                     f"{self.workers} sandbox slots and a queue of "
                                     f"{self.max_queue}; retry later",
                                {"Retry-After": str(self._retry_after(queued))})
            self.pending += n

    def _retry_after(self, queued: int) -> int:
        p50 = self.metrics.p50()
        if p50 <= 0:
            return DEFAULT_RETRY_AFTER_S
        return max(1, math.ceil((queued + 1) / self.workers * p50))

    def _release(self, n: int) -> None:
        with self._lock:
            self.pending -= n

    async def run(self, request: Request, n: int, fn):
        """``fn()`` in a worker thread under a new cancel scope, once ``n`` rollouts are
        admitted; cancelled when the client disconnects first.

        Raises:
            HttpError: 503, the queue is full.
            ClientGone: the client went away (the scope is cancelled).
        """
        self._admit(n)
        scope = cancel.Scope()
        with self._lock:
            self._scopes.add(scope)

        def call():
            with cancel.scope(scope):
                return fn()

        def finished(_):
            self._release(n)
            with self._lock:
                self._scopes.discard(scope)

        try:
            cf = self.pool.submit(contextvars.copy_context().run, call)
        except BaseException:
            finished(None)
            raise
        cf.add_done_callback(finished)
        work = asyncio.wrap_future(cf)
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
            if work.done():
                return work.result()
        finally:
            gone.cancel()
        cf.cancel()  # not started yet: it never starts
        self.metrics.cancelled.inc()
        await asyncio.to_thread(scope.cancel)
        raise ClientGone

    def cancel_all(self) -> None:
        """Cancel every request in progress (server shutdown); does not wait."""
        with self._lock:
            scopes = list(self._scopes)
        for s in scopes:
            threading.Thread(target=s.cancel, daemon=True).start()

    def close(self) -> None:
        """Cancel every request in progress, then wait for the worker threads to end (those
        not started never start); close the warm sandboxes still waiting."""
        self.cancel_all()
        self.pool.shutdown(wait=True, cancel_futures=True)
        self._warm.close()  # the sandboxes still waiting are closed


async def _disconnected(request: Request) -> None:
    """Returns once the client has gone away (the body has been read already)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def _body(request: Request, limit: int) -> dict:
    length = request.headers.get("content-length")
    chunked = "chunked" in request.headers.get("transfer-encoding", "").lower()
    if length is None and not chunked:
        raise HttpError(411, "Content-Length required")
    if length is not None:
        try:
            n = int(length)
        except ValueError:
            raise HttpError(400, "Content-Length is not a number") from None
        if n < 0 or n > limit:
            raise HttpError(413, f"body of {n} bytes is over the {limit}-byte limit")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HttpError(413, f"body is over the {limit}-byte limit")
        chunks.append(chunk)
    try:
        body = json.loads(b"".join(chunks))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise HttpError(400, f"body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise HttpError(400, f"body must be a JSON object, got {type(body).__name__}")
    return body


def _records_json(recs: list[RewardRecord]) -> list[dict]:
    return [json.loads(r.to_json()) for r in recs]


async def _route_score(svc: Service, request: Request, body: dict) -> dict:
    req = _score_request(body)
    recs = await svc.run(request, 1, lambda: score_requests([req], 1))
    svc.metrics.records(recs)
    return _records_json(recs)[0]


async def _route_score_batch(svc: Service, request: Request, body: dict) -> dict:
    req = _validate(BatchRequest, body)
    if len(req.rollouts) > svc.max_rollouts:
        raise HttpError(413, f"{len(req.rollouts)} rollouts, over the limit of "
                             f"{svc.max_rollouts} per request")
    from proctor.harness.batch import BatchItem, bad_input_record

    valid, out = [], [None] * len(req.rollouts)
    for i, obj in enumerate(req.rollouts):
        try:
            valid.append((i, _score_request(obj)))
        except HttpError as exc:
            rid = obj.get("rollout_id") if isinstance(obj.get("rollout_id"), str) else None
            out[i] = bad_input_record(BatchItem(i, None, problem=str(exc), raw_id=rid))
    workers = min(req.workers or svc.workers, svc.workers)
    if valid:
        records = await svc.run(request, len(valid),
                                lambda: score_requests([r for _, r in valid], workers))
        for (i, _), rec in zip(valid, records, strict=True):
            out[i] = rec
    svc.metrics.records(out)
    return {"records": _records_json(out)}


async def _route_get_reward(svc: Service, request: Request, body: dict) -> dict:
    req = _validate(RewardRequest, body)
    if not len(req.query) == len(req.prompts) == len(req.labels):
        raise HttpError(422, "query, prompts and labels must have the same length")
    if len(req.query) > svc.max_rollouts:
        raise HttpError(413, f"{len(req.query)} queries, over the limit of "
                             f"{svc.max_rollouts} per request")
    recs = await svc.run(request, max(1, len(req.query)),
                         lambda: reward_records(req, svc.workers))
    svc.metrics.records(recs)
    return openrlhf_reply(recs)


ROUTES = {"/v1/score": _route_score, "/v1/score_batch": _route_score_batch,
          "/get_reward": _route_get_reward}
GET_ROUTES = ("/", "/healthz", "/metrics", "/v1/live")


def _error(status: int, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": {"status": status, "message": message}}, status_code=status,
                        headers=headers)


def _get(svc: Service, path: str) -> Response:
    if path == "/healthz":
        return JSONResponse({"status": "ok", "version": __version__})
    if path == "/v1/live":
        return JSONResponse(svc.metrics.live(), headers={"Cache-Control": "no-store"})
    if path == "/":
        return HTMLResponse(live_page())
    return Response(svc.metrics.text(), media_type=CONTENT_TYPE)


def make_app(svc: Service) -> Starlette:
    """The ASGI app over ``svc`` (one catch-all route: every answer, 404 and 405 included,
    has the JSON error shape)."""

    async def dispatch(request: Request) -> Response:
        path, method = request.url.path, request.method
        route = path if path in ROUTES or path in GET_ROUTES else "other"
        started = time.monotonic()
        try:
            if path in GET_ROUTES:
                if method not in ("GET", "HEAD"):
                    raise HttpError(405, f"{path} takes GET")
                resp = _get(svc, path)
            elif path in ROUTES:
                if method != "POST":
                    raise HttpError(405, f"{path} takes POST")
                payload = await ROUTES[path](svc, request, await _body(request, svc.max_body))
                svc.metrics.request(path, time.monotonic() - started)
                resp = JSONResponse(payload)
            else:
                raise HttpError(404, f"no such endpoint: {path}")
        except HttpError as exc:
            resp = _error(exc.status, str(exc), exc.headers)
        except ClientGone:
            resp = _error(499, "client went away: request cancelled")
        except Exception as exc:  # noqa: BLE001 - a server must answer, not die
            resp = _error(500, f"{type(exc).__name__}: {exc}")
        svc.metrics.requests.labels(route, str(resp.status_code)).inc()
        if svc.log_requests:
            client = request.client.host if request.client else "-"
            sys.stderr.write(f"[proctor serve] {client} {method} {path} {resp.status_code} "
                             f"{time.monotonic() - started:.2f}s\n")
        return resp

    return Starlette(routes=[Route("/{path:path}", dispatch, methods=METHODS)])


# --------------------------------------------------------------------------- the server


class _Uvicorn(uvicorn.Server):
    """Cancels the requests in progress as soon as shutdown begins (SIGINT / SIGTERM), so
    the graceful shutdown does not wait for their scoring."""

    on_exit = None

    def handle_exit(self, sig, frame) -> None:
        if self.on_exit is not None:
            self.on_exit()
        super().handle_exit(sig, frame)


class ProctorServer:
    """A uvicorn server on a socket bound at construction (``server_address[1]`` is the
    port, also with ``port=0``). :meth:`serve_forever` runs it in the calling thread (the
    main thread handles SIGINT / SIGTERM); :meth:`shutdown` stops it from another."""

    def __init__(self, address: tuple[str, int], **service_kw) -> None:
        self.service = Service(**service_kw)
        host, port = address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.create_server((host, port), family=family, backlog=1024)
        self.server_address = self.socket.getsockname()[:2]
        config = uvicorn.Config(make_app(self.service), log_level="warning",
                                access_log=False, lifespan="off",
                                timeout_graceful_shutdown=10)
        self.uvicorn = _Uvicorn(config)
        self.uvicorn.on_exit = self.service.cancel_all
        self._thread: threading.Thread | None = None

    def serve_forever(self) -> None:
        """Serve on the bound socket until :meth:`shutdown` or a signal, in the calling
        thread; then close the service (cancelling what is left)."""
        # In the main thread, uvicorn's handlers end the server gracefully, then put back
        # these and raise the signal again: they remove the sandboxes still open.
        cleanup.install_signal_handlers()
        try:
            self.uvicorn.run(sockets=[self.socket])
        finally:
            self.service.close()

    def start(self) -> threading.Thread:
        """Serve in a daemon thread; returns once the server accepts connections."""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True,
                                        name="proctor-serve")
        self._thread.start()
        while not self.uvicorn.started:
            if not self._thread.is_alive():
                raise RuntimeError("proctor serve failed to start")
            time.sleep(0.02)
        return self._thread

    def shutdown(self) -> None:
        """Stop serving from another thread: cancel the requests in progress, ask uvicorn to
        exit and wait (at most 60 s) for the thread :meth:`start` started."""
        self.service.cancel_all()
        self.uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=60)

    def server_close(self) -> None:
        """Close the listening socket (after :meth:`shutdown`; ``socketserver``'s name)."""
        self.socket.close()


def make_server(host: str = "127.0.0.1", port: int = 8765, **kw) -> ProctorServer:
    """A bound server (``port=0`` picks a free port: ``server.server_address[1]``).
    Keywords: ``workers``, ``max_queue``, ``max_body``, ``max_rollouts``, ``log_requests``,
    ``warm`` (see :class:`Service`)."""
    return ProctorServer((host, port), **kw)
