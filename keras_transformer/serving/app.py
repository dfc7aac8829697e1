"""The HTTP application: TF Serving's REST API over a `ServedModel`, on FastAPI (run by uvicorn, `serving.server`).

Routes (NAME is the model name; `/versions/1` may follow it, as TF Serving allows):

- `GET /v1/models/NAME`: the model's status (`{"model_version_status": [...]}`, state `AVAILABLE`);
- `GET /v1/models/NAME/metadata`: its signatures, inputs and outputs;
- `POST /v1/models/NAME:predict`: a predict request (`serving.protocol`), batched with concurrent ones
  (`serving_default` joins the running decode at its next step where the model allows: `serving.continuous`);
- `POST /v1/models/NAME:stream`: `{"text": ...}` answered as it is decoded, one JSON line per piece of text
  (`application/x-ndjson`), then a line with the whole translation.

Every error is `{"error": "..."}` with a 4xx or 5xx status, and the server goes on serving. A request whose `Host`
is not the server's own (`host_allowed`) gets 403, a browser's predict or stream body (an `Origin` or
`Sec-Fetch-Site` header) that is not `application/json` 415 (other clients may send any type, as TF Serving
allows), a body not received within `body_timeout_s` 408. An internal error is a 500 that says only "internal
error" and the request id, which the server's log line carries with the details (every response has the
`X-Request-Id` header).
"""

import asyncio
import contextlib
import ipaddress
import json
import logging
import re
import threading
import time
import uuid

from fastapi import FastAPI
from fastapi import Request
from fastapi.responses import JSONResponse
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException

from keras_transformer.serving.batching import Batcher
from keras_transformer.serving.batching import QueueFull
from keras_transformer.serving.batching import ShuttingDown
from keras_transformer.serving.continuous import ENGINE_SIGNATURE
from keras_transformer.serving.continuous import ContinuousBatcher
from keras_transformer.serving.fair_share import FairShare
from keras_transformer.serving.protocol import RequestError
from keras_transformer.serving.protocol import decode_json
from keras_transformer.serving.protocol import json_safe
from keras_transformer.serving.protocol import parse_predict
from keras_transformer.serving.protocol import shape_response
from keras_transformer.serving.settings import ServerSettings

log = logging.getLogger("keras_transformer.serving")

_ROUTE = re.compile(r"^(?P<name>[^/:]+)(?:/versions/(?P<version>[^/:]+))?(?:(?P<metadata>/metadata)|:(?P<verb>\w+))?$")


def _error(status, message):
    return JSONResponse({"error": message}, status_code=status)


def _status_body():
    return {"model_version_status": [{"version": "1", "state": "AVAILABLE",
                                      "status": {"error_code": "OK", "error_message": ""}}]}


async def _read_body(request, limit, timeout):
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    browser = "origin" in request.headers or "sec-fetch-site" in request.headers
    if browser and kind != "application/json":  # a form or text/plain: what a page can make a browser send unasked
        raise RequestError(f"a request from a web browser must send its JSON body as Content-Type: "
                           f"application/json, got {kind or 'no Content-Type'!r}", 415)
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise RequestError(f"the request body has {int(length)} bytes; at most {limit} (--max-body-bytes)", 413)
    chunks, size = [], 0
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise RequestError(f"the request body exceeds {limit} bytes (--max-body-bytes)", 413)
                chunks.append(chunk)
    except TimeoutError:
        raise RequestError(f"the request body did not arrive within {timeout:g} s (--body-timeout-s)", 408) from None
    return b"".join(chunks)


def host_allowed(host_header, listen, allowed=()):
    """Whether a request's `Host` header names this server, listening on `listen` (`None`: not checked).

    Accepted: the listen address; `localhost` and loopback addresses on a loopback or every-interface address;
    any address literal on an every-interface address (a DNS-rebinding page sends its own domain name, never an
    address); a name in `allowed` (`"*"`: anything). A request without `Host` (HTTP/1.0) is accepted."""
    if listen is None or host_header is None or "*" in allowed:
        return True
    name = host_header.strip().lower()
    name = name[1:name.index("]")] if name.startswith("[") and "]" in name else name.rsplit(":", 1)[0] if (
        name.count(":") == 1) else name
    if name in allowed or name == listen.lower():
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        address = None
    wildcard = listen in ("0.0.0.0", "::", "")
    try:
        loopback = ipaddress.ip_address(listen).is_loopback
    except ValueError:
        loopback = listen == "localhost"
    if name == "localhost" or (address is not None and address.is_loopback):
        return loopback or wildcard
    return wildcard and address is not None


def internal_error(request_id):
    """The text of a 500: no exception text, path or op name reaches a client; the log has them, by request id."""
    return f"internal error (request id {request_id}; the server log has the details)"


class AccessLog:
    """ASGI middleware: a request id (`X-Request-Id`), one log line per request (id, client, method, path, status,
    sentences, milliseconds), the `Host` check (403), and a JSON 500 for an unexpected failure (the server goes on).
    Plain ASGI: no extra task or stream per request."""

    def __init__(self, app, listen=None, allowed=()):
        self.app, self.listen, self.allowed = app, listen, allowed

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        begin = time.perf_counter()
        state = scope.setdefault("state", {})
        state["sentences"] = 0
        state["request_id"] = request_id = uuid.uuid4().hex[:16]
        status, logged = [], []

        def log_line():
            if not logged:  # once, before the response's last bytes go out (a client never sees it first)
                logged.append(True)
                client = scope["client"][0] if scope.get("client") else "-"
                log.info("%s %s %s %s %d %d sentences %.1f ms", request_id, client, scope["method"], scope["path"],
                         status[0] if status else 500, state["sentences"], 1000 * (time.perf_counter() - begin))

        async def sending(message):
            if message["type"] == "http.response.start":
                status.append(message["status"])
                message = dict(message, headers=[*message.get("headers", []), (b"x-request-id", request_id.encode())])
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                log_line()
            await send(message)

        host = dict(scope.get("headers") or []).get(b"host")
        if not host_allowed(None if host is None else host.decode("latin-1"), self.listen, self.allowed):
            await _error(403, f"Host {host.decode('latin-1')[:100]!r} is not this server's address (start it with "
                         "--allow-host NAME to accept that name)")(scope, receive, sending)
            return log_line()
        try:
            await self.app(scope, receive, sending)
        except Exception:
            log.exception("request %s: %s %s failed", request_id, scope["method"], scope["path"])
            if not status:  # nothing sent yet: the client gets a JSON 500
                await _error(500, internal_error(request_id))(scope, receive, sending)
        log_line()


class AppState:
    """What the routes read (`app.state.serving`): the served model, the settings, and, while the application runs
    (its lifespan), the batch-at-a-time worker `batcher`, the continuous-batching `engine` where the model decodes
    with one (else `None`), and the semaphore of the `:stream` requests running."""

    def __init__(self, served, settings):
        self.served, self.settings = served, settings
        self.batcher = self.engine = None
        self.streams = threading.BoundedSemaphore(settings.max_streams)

    def start(self):
        settings, slots = self.settings, getattr(self.served, "engine", None)  # a ServedModel's SlotEngine, if any
        share = FairShare() if slots is not None else None  # the engine and the batcher take turns on the cores
        self.batcher = Batcher(self.served.run, settings.max_batch_size, settings.batch_timeout_ms / 1000,
                               settings.max_queued, share=share)
        self.engine = (ContinuousBatcher(self.served.translator, slots, settings.max_queued, share, settings.timeout_s)
                       if slots is not None else None)

    async def stop(self):
        """Drains and stops the workers (uvicorn has stopped taking requests and finished the open ones)."""
        await asyncio.to_thread(self.batcher.close, self.settings.timeout_s)
        if self.engine is not None:
            await asyncio.to_thread(self.engine.close, self.settings.timeout_s)


@contextlib.asynccontextmanager
async def _lifespan(app):
    state = app.state.serving
    state.start()
    try:
        yield
    finally:
        await state.stop()


async def _request_error(request, error):
    return _error(error.status, str(error))


async def _http_error(request, error):
    return _error(error.status_code, f"{request.method} {request.url.path}: {error.detail}")


def _route(served, rest):
    """The parts of `/v1/models/REST` (name, version, metadata, verb) for the model `served`; 404 for another."""
    match = _ROUTE.match(rest)
    if not match or match["name"] != served.name:
        raise RequestError(f"no model {rest.split(':')[0].split('/')[0]!r} here: this server serves "
                           f"{served.name!r} (/v1/models/{served.name})", 404)
    if match["version"] not in (None, "1"):
        raise RequestError(f"model {served.name!r} has no version {match['version']!r}; it serves version 1", 404)
    return match


def _busy(error):
    return JSONResponse({"error": f"the server is busy: {error}; retry later"}, status_code=429,
                        headers={"Retry-After": "1"})


async def get_model(rest: str, request: Request):
    """`GET /v1/models/NAME[/versions/1][/metadata]`: the model's status or its metadata."""
    served = request.app.state.serving.served
    match = _route(served, rest)
    if match["verb"]:
        raise RequestError(f"use POST for :{match['verb']}", 405)
    return served.metadata() if match["metadata"] else _status_body()


async def post_model(rest: str, request: Request):
    """`POST /v1/models/NAME[/versions/1]:predict` or `:stream`."""
    state = request.app.state.serving
    served, settings = state.served, state.settings
    match = _route(served, rest)
    if match["verb"] not in ("predict", "stream"):
        raise RequestError(f"unknown method {match['verb'] or '(none)'!r}: POST /v1/models/{served.name}:predict "
                           f"or :stream", 404)
    payload = decode_json(await _read_body(request, settings.max_body_bytes, settings.body_timeout_s))
    if match["verb"] == "stream":
        return stream(state, payload, request)
    return await predict(state, payload, request)


async def predict(state, payload, request):
    """A predict request's answer: checked (what can be refused is refused before it is queued), queued on the
    engine (`serving_default`, where it runs) or the batcher, and awaited up to the timeout."""
    served, settings = state.served, state.settings
    parsed = parse_predict(payload, served.signatures, settings.max_instances)
    request.state.sentences = len(parsed.rows)
    await asyncio.to_thread(served.check, parsed)
    if not parsed.rows:
        return shape_response(parsed, [])
    rows = served.with_languages(parsed.rows)  # checked before queueing: a bad code is this request's 400
    runner = state.engine if state.engine is not None and parsed.batch_key[0] == ENGINE_SIGNATURE else state.batcher
    try:
        future = runner.submit(parsed.batch_key, rows)
    except QueueFull as error:
        return _busy(error)
    except ShuttingDown as error:
        return _error(503, str(error))
    try:
        results = await asyncio.wait_for(asyncio.wrap_future(future), settings.timeout_s)
    except asyncio.TimeoutError:
        return _error(504, f"no answer within {settings.timeout_s:g} s (--timeout-s)")
    except ValueError as error:  # the translator refused the input (a prefix too long, ...)
        return _error(400, str(error))
    return JSONResponse(json_safe(shape_response(parsed, results)))


def _stream_pair(state, payload):
    """A `:stream` request's checked fields: a multilingual model's `(source, target)` codes (`None` otherwise)."""
    served = state.served
    fields = {"text", "source_language", "target_language"} if served.languages else {"text"}
    if set(payload) - fields or not isinstance(payload.get("text"), str):
        raise RequestError("a :stream request is {\"text\": \"...\"}: one source sentence" + (
            ", with optional \"source_language\" and \"target_language\" codes" if served.languages else ""))
    if not served.translator.supports("stream"):
        raise RequestError(f"{type(served.translator).__name__} does not stream; serve a run directory")
    if not served.languages:
        return None
    if state.engine is None:
        raise RequestError("a multilingual model streams with continuous batching (not --batching static)")
    for name in ("source_language", "target_language"):
        if payload.get(name) is not None and not isinstance(payload[name], str):
            raise RequestError(f"{name} must be a string")
    _, *pair = served.with_languages([(payload["text"], payload.get("source_language"),
                                       payload.get("target_language"))])[0]
    return pair


def stream(state, payload, request):
    """A `:stream` request's answer: one JSON line per piece of the translation as it is decoded (in the engine,
    beside the other requests, where it runs), then the whole translation; at most `max_streams` at once."""
    pair = _stream_pair(state, payload)
    if not state.streams.acquire(blocking=False):
        return JSONResponse({"error": f"{state.settings.max_streams} streams are running (--max-streams); retry "
                                      "later"}, status_code=429, headers={"Retry-After": "1"})
    request.state.sentences = 1
    released = threading.Event()

    def release():
        if not released.is_set():
            released.set()
            state.streams.release()

    try:  # with continuous batching, the sentence decodes in the engine beside the other requests
        engine = state.engine
        pieces = state.served.stream(payload["text"]) if engine is None else engine.stream(payload["text"], pair)
    except QueueFull as error:
        release()
        return _busy(error)
    except ShuttingDown as error:
        release()
        return _error(503, str(error))

    def lines():
        try:
            text = ""
            for piece in pieces:
                text += piece
                yield json.dumps({"text": piece}) + "\n"
            yield json.dumps({"translation": text, "done": True}) + "\n"
        except Exception:  # the status is sent already: the last line says that it failed
            request_id = request.state.request_id
            log.exception("request %s: stream failed", request_id)
            yield json.dumps({"error": internal_error(request_id)}) + "\n"
        finally:
            pieces.close()  # a client that left frees the engine's slot
            release()

    # The background task also runs when the client left before the first line (the generator never started).
    return StreamingResponse(lines(), media_type="application/x-ndjson", background=BackgroundTask(release))


def create_app(served, settings=None, listen=None):
    """The FastAPI application serving `served` (a `ServedModel`) with `settings` (a `ServerSettings`); `listen`:
    the address the server listens on, which a request's `Host` must name (`None`: not checked). Its routes read
    `app.state.serving` (an `AppState`)."""
    app = FastAPI(title="keras-transformer", lifespan=_lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.serving = state = AppState(served, settings or ServerSettings())
    app.add_exception_handler(RequestError, _request_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_middleware(AccessLog, listen=listen, allowed=state.settings.allow_hosts)
    app.add_api_route("/v1/models/{rest:path}", get_model, methods=["GET"])
    app.add_api_route("/v1/models/{rest:path}", post_model, methods=["POST"])
    return app
