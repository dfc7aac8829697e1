"""Running the application: `serve` (what `keras-transformer serve` calls) and `start_server` (a server in a thread,
for tests, benchmarks and notebooks). uvicorn runs the FastAPI application; on SIGINT or SIGTERM it stops taking
connections, finishes the requests it accepted (up to the request timeout), then the batcher drains and stops."""

import json
import logging
import os
import signal
import socket
import threading
import time

from keras_transformer.decoding.translator import tokenize_rows
from keras_transformer.serving.app import create_app
from keras_transformer.serving.pacing import RefusalPacing
from keras_transformer.serving.served_model import ServedModel
from keras_transformer.serving.settings import ServerSettings

log = logging.getLogger("keras_transformer.serving")


def default_model_name(artifact):
    """The model name an artifact is served under by default: its directory's (or file's) name, without suffix."""
    name = os.path.basename(os.path.normpath(os.fspath(artifact)))
    return os.path.splitext(name)[0] if name.endswith(".tflite") else name


def load_served_model(artifact, model_name=None, decoding=None, settings=None, languages=(None, None)):
    """A `ServedModel` of any artifact `keras_transformer.load_translator` takes; `languages`: a multilingual
    model's default `(source, target)` codes."""
    from keras_transformer.translators import load_translator

    settings = settings or ServerSettings()
    name = model_name or default_model_name(artifact)
    if not name or "/" in name or ":" in name:
        raise ValueError(f"model name {name!r}: must be non-empty, without '/' or ':' (--model-name)")
    return ServedModel(load_translator(artifact), name, decoding=decoding, batch_size=settings.max_batch_size,
                       continuous=settings.batching == "continuous", steps_per_call=settings.steps_per_call,
                       source_language=languages[0], target_language=languages[1], signatures=settings.signatures,
                       max_n_best=settings.max_n_best, max_decode_rows=settings.max_decode_rows,
                       max_request_tokens=settings.max_request_tokens)


def warm_up_shapes(served, settings):
    """The `(signature, rows, source tokens)` shapes `warm_up` decodes.

    With a `SlotEngine` (continuous batching): `serving_default` at the engine's slots and each of its source
    buckets. Batch at a time, on a translator with fixed shapes (`ServedModel.batch_shapes`): each of its shapes,
    for each signature served. Otherwise (an exported artifact, whose graph pads batches itself) `serving_default`
    at every batch bucket the batcher can form (1, 2, 4, 8, then multiples of 8 up to `max_batch_size`) and every
    source-width bucket (multiples of 8 up to the model's source length): a SavedModel exported with XLA compiles
    each on first use."""
    shapes = []
    if getattr(served, "engine", None) is not None:
        shapes += [("serving_default", served.engine.slots, width) for width in served.engine.source_buckets]
    for name, pairs in served.batch_shapes.items():
        shapes += [(name, rows, width) for rows, width in pairs]
    if shapes:
        return shapes
    translator = served.translator
    longest = getattr(getattr(translator, "parts", None), "max_length", None) or getattr(translator, "max_length", 64)
    sizes = sorted({min(n, settings.max_batch_size) for n in (1, 2, 4, 8)} | set(
        range(16, settings.max_batch_size + 1, 8)))
    widths = sorted({min(w, longest) for w in range(8, longest + 8, 8)})
    return [("serving_default", size, width) for width in widths for size in sizes]


def _text_of_width(served, width, longest):
    """A text that `[START] text [END]` makes `width` tokens or a few fewer (a long one is cut at `longest`)."""
    tokenizer = getattr(served.translator, "source_tokenizer", None)
    if tokenizer is None or width >= longest:
        return " ".join(["a"] * max(1, width - 2))
    for words in range(max(1, width - 2), 0, -1):
        if len(tokenize_rows(tokenizer, [" ".join(["a"] * words)])[0]) + 2 <= width:
            return " ".join(["a"] * words)
    return "a"


def _example(served, name, text):
    return {"translate_with_prefix": (text, ""), "score": (text, text)}.get(name, served.example_row(text)
                                                                             if name == "serving_default" else (text,))


def warm_up(served, settings, progress=None):
    """Compiles what the server runs before the first request: the engine's step and inserts at each source bucket
    (continuous batching), and a dummy batch of each batch-at-a-time shape of each signature served
    (`warm_up_shapes`). `progress(done, total)` is called after each. Returns the seconds it took."""
    begin = time.perf_counter()
    shapes = warm_up_shapes(served, settings)
    done = 0
    if getattr(served, "engine", None) is not None:  # every step and insert the engine runs, compiled once
        served.engine.warm_up(progress=None if progress is None else lambda d, t: progress(d, len(shapes)))
        translator = served.translator  # and the tokenizers' traced functions, which the engine's requests call
        translator.target_tokenizer.detokenize(translator.source_tokenizer.tokenize(["warm up", "a"]))
        done = len(served.engine.source_buckets)
    longest = max(width for _, _, width in shapes)
    texts = {}
    for name, size, width in shapes[done:]:
        if width not in texts:
            texts[width] = _text_of_width(served, width, longest)
        options = (("n_best", 1),) if name == "n_best" else (("normalize", False),) if name == "score" else ()
        served.run((name, options), [_example(served, name, texts[width])] * size)
        done += 1
        if progress is not None:
            progress(done, len(shapes))
    return time.perf_counter() - begin


class ConnectionLimit:
    """ASGI wrapper: past `max_connections` open connections (the asking one included), a request gets a 503 JSON
    error at once and its connection is closed. `connections` is uvicorn's set of open connections."""

    def __init__(self, app, max_connections):
        self.app, self.max_connections, self.connections = app, max_connections, ()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or len(self.connections) <= self.max_connections:
            return await self.app(scope, receive, send)
        log.warning("503 %s %s: more than %d open connections", scope.get("method"), scope.get("path"),
                    self.max_connections)
        body = json.dumps({"error": f"the server holds its most open connections ({self.max_connections}, "
                                    "--max-connections); try again later"}).encode()
        await send({"type": "http.response.start", "status": 503,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close"), (b"retry-after", b"1")]})
        await send({"type": "http.response.body", "body": body})


def _server(app, settings, log_level):
    """The uvicorn server of `app`, its connections limited by `ConnectionLimit`, each address's refusals paced
    (`RefusalPacing`, holding at most a quarter of the connections)."""
    import uvicorn

    paced = RefusalPacing(app, settings.refusals_per_s, settings.refusal_delay_s,
                          max_held=max(1, settings.max_connections // 4))
    limited = ConnectionLimit(paced, settings.max_connections)
    # Our own access line per request (`serving.app`), so uvicorn's access log is off; its lifecycle lines stay.
    server = uvicorn.Server(uvicorn.Config(limited, log_config=None, access_log=False, log_level=log_level,
                                           lifespan="on", timeout_graceful_shutdown=settings.timeout_s,
                                           timeout_keep_alive=5))
    limited.connections = server.server_state.connections
    return server


def _bind(host, port):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Replies go out at once (no Nagle wait for the client's delayed ACK, about 40 ms per response); asyncio sets
    # this on accepted sockets of protocol IPPROTO_TCP, and Linux also passes it on from the listening socket.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise OSError(error.errno, f"cannot listen on {host}:{port}: {error.strerror} (--host/--port)") from None
    sock.listen(2048)
    return sock


def serve(served, host="127.0.0.1", port=8501, settings=None, log_level="info", on_ready=None):
    """Serves `served` (a `ServedModel`) on `host:port` until SIGINT or SIGTERM (uvicorn's graceful shutdown).

    `on_ready(url)` is called once the socket listens.
    """
    settings = settings or ServerSettings()
    sock = _bind(host, port)
    server = _server(create_app(served, settings, listen=host), settings, log_level)
    if on_ready is not None:
        on_ready(f"http://{host}:{sock.getsockname()[1]}")
    # uvicorn handles SIGINT/SIGTERM (a graceful shutdown), then raises the signal again for the handlers it
    # found; with these no-op handlers a finished shutdown is a normal return (exit status 0).
    main = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, lambda *_: None) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        server.run(sockets=[sock])
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


class RunningServer:
    """A server started by `start_server`: `url` (`http://HOST:PORT`), `app`, and `stop()` (graceful)."""

    def __init__(self, server, thread, url, app):
        self._server, self._thread, self.url, self.app = server, thread, url, app

    def stop(self, timeout=60):
        self._server.should_exit = True
        self._thread.join(timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def start_server(served, host="127.0.0.1", port=0, settings=None, log_level="warning"):
    """Starts serving `served` in a background thread (port 0: any free port); returns a `RunningServer` once it
    answers."""
    settings = settings or ServerSettings()
    sock = _bind(host, port)
    app = create_app(served, settings, listen=host)
    server = _server(app, settings, log_level)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                              name="keras-transformer-serve")
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.01)
    return RunningServer(server, thread, f"http://{host}:{sock.getsockname()[1]}", app)
