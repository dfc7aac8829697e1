"""The HTTP server over real sockets: TF Serving's REST routes on a tiny run, bad requests, queueing, timeouts,
batching, graceful shutdown, the request log and `keras-transformer serve`.

Queueing, timeouts, errors, batching and shutdown are shown on a stub model whose `run` can be held on an event,
so what is running and what is queued is known whatever the timing of the threads.
"""

import contextlib
import logging
import os
import pathlib
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

from keras_transformer.serving import ServedModel
from keras_transformer.serving import ServerSettings
from keras_transformer.serving import start_server
from keras_transformer.serving.protocol import RequestError
from tests.export.helpers import SENTENCES

WAIT = 30  # seconds any wait may take before it counts as a hang
STARTUP = 180  # seconds `keras-transformer serve` may take to import TensorFlow, load the run and listen
REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server(served_model):
    running = start_server(served_model, port=0, settings=ServerSettings())
    yield running
    running.stop()


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.url, timeout=WAIT) as c:
        yield c


@pytest.fixture(scope="module")
def model(served_model):
    """The model's path: `/v1/models/NAME`."""
    return f"/v1/models/{served_model.name}"


def assert_json_error(response, status):
    statuses = status if isinstance(status, tuple) else (status,)
    assert response.status_code in statuses, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert isinstance(error, str) and error.strip()


# The routes, on the tiny run


@pytest.mark.parametrize("payload, key", [
    ({"instances": SENTENCES}, "predictions"),
    ({"instances": [{"text": s} for s in SENTENCES]}, "predictions"),
    ({"signature_name": "serving_default", "instances": SENTENCES}, "predictions"),
    ({"inputs": SENTENCES}, "outputs"),
    ({"inputs": {"text": SENTENCES}}, "outputs"),
    ({"signature_name": "serving_default", "inputs": {"text": SENTENCES}}, "outputs"),
], ids=["rows", "row-objects", "rows-explicit-signature", "columnar-list", "columnar-object",
        "columnar-explicit-signature"])
def test_predict_answers_the_translators_translations(client, model, expected_translations, payload, key):
    response = client.post(f"{model}:predict", json=payload)
    assert response.status_code == 200, response.text
    assert response.json() == {key: expected_translations}


def test_version_1_is_the_model(client, model, expected_translations):
    response = client.post(f"{model}/versions/1:predict", json={"instances": SENTENCES})
    assert response.status_code == 200, response.text
    assert response.json() == {"predictions": expected_translations}
    assert client.get(f"{model}/versions/1").json() == client.get(model).json()
    assert client.get(f"{model}/versions/1/metadata").json() == client.get(f"{model}/metadata").json()


@pytest.mark.parametrize("payload, answer", [
    ({"instances": []}, {"predictions": []}),
    ({"inputs": []}, {"outputs": []}),
    ({"inputs": {"text": []}}, {"outputs": []}),
], ids=["rows", "columnar-list", "columnar-object"])
def test_no_instances_are_answered_with_no_predictions(client, model, payload, answer):
    response = client.post(f"{model}:predict", json=payload)
    assert response.status_code == 200, response.text
    assert response.json() == answer


def test_status_is_available(client, model):
    response = client.get(model)
    assert response.status_code == 200
    (version,) = response.json()["model_version_status"]
    assert version["state"] == "AVAILABLE"
    assert version["version"] == "1"


def test_metadata_describes_serving_default(client, model, served_model):
    response = client.get(f"{model}/metadata")
    assert response.status_code == 200
    body = response.json()
    assert body["model_spec"]["name"] == served_model.name
    signature = body["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert signature["inputs"]["text"]["dtype"] == "DT_STRING"
    assert signature["outputs"]["translation"]["dtype"] == "DT_STRING"
    assert list(signature["outputs"]) == ["translation"]


# Bad requests: each a 4xx with a JSON error, and the server answers the next good request


def _chunks(size):
    """A body of `size` bytes sent in chunks (no Content-Length)."""
    chunk = b"x" * (1 << 16)
    for _ in range(size // len(chunk)):
        yield chunk


JSON = {"content-type": "application/json"}

BAD_REQUESTS = [
    pytest.param("POST", "{model}:predict", {"content": b'{"instances": ["a"', "headers": JSON}, 400,
                 id="malformed-json"),
    pytest.param("POST", "{model}:predict", {"json": ["a"]}, 400, id="json-array"),
    pytest.param("POST", "{model}:predict", {"json": "a"}, 400, id="json-string"),
    pytest.param("POST", "{model}:predict", {"content": b"", "headers": JSON}, 400, id="empty-body"),
    pytest.param("POST", "{model}:predict", {"json": {"instance": ["a"]}}, 400, id="unknown-field"),
    pytest.param("POST", "{model}:predict", {"json": {"instances": ["a"], "inputs": ["a"]}}, 400,
                 id="instances-and-inputs"),
    pytest.param("POST", "{model}:predict", {"json": {"signature_name": "serving_default"}}, 400,
                 id="neither-instances-nor-inputs"),
    pytest.param("POST", "{model}:predict", {"json": {"instances": [3]}}, 400, id="number-instance"),
    pytest.param("POST", "{model}:predict", {"json": {"instances": [None]}}, 400, id="null-instance"),
    pytest.param("POST", "{model}:predict", {"json": {"instances": [["a"]]}}, 400, id="nested-list-instance"),
    pytest.param("POST", "{model}:predict", {"json": {"instances": "a"}}, 400, id="instances-not-a-list"),
    pytest.param("POST", "{model}:predict", {"json": {"instances": [{"txt": "a"}]}}, 400,
                 id="instance-without-text"),
    pytest.param("POST", "{model}:predict", {"json": {"instances": [{"text": "a", "n_best": 2}]}}, 400,
                 id="option-of-another-signature"),
    pytest.param("POST", "{model}:predict", {"content": b"x" * (10 << 20), "headers": JSON}, 413, id="10MB-body"),
    pytest.param("POST", "{model}:predict", {"content": _chunks, "headers": JSON}, 413, id="10MB-chunked-body"),
    pytest.param("POST", "{model}:predict", {"json": {"instances": ["a"] * 10_000}}, 413, id="10000-instances"),
    pytest.param("POST", "{model}:predict", {"json": {"inputs": ["a"] * 10_000}}, 413, id="10000-inputs"),
    pytest.param("POST", "{model}:predict", {"content": b'{"instances": ["\xff\xfe"]}', "headers": JSON}, 400,
                 id="invalid-utf8"),
    pytest.param("POST", "{model}:predict", {"json": {"signature_name": "classify", "instances": ["a"]}}, 400,
                 id="unknown-signature"),
    pytest.param("POST", "{model}:predict", {"json": {"signature_name": 1, "instances": ["a"]}}, 400,
                 id="signature-not-a-string"),
    pytest.param("POST", "{model}:predict", {"json": {"inputs": 3}}, 400, id="columnar-number"),
    pytest.param("POST", "{model}:predict", {"json": {"inputs": {"text": 3}}}, 400, id="columnar-text-number"),
    pytest.param("POST", "{model}:predict", {"json": {"inputs": {"text": ["a", None]}}}, 400,
                 id="columnar-null-text"),
    pytest.param("POST", "/v1/models/other:predict", {"json": {"instances": ["a"]}}, 404, id="unknown-model"),
    pytest.param("GET", "/v1/models/other", {}, 404, id="unknown-model-status"),
    pytest.param("POST", "{model}/versions/2:predict", {"json": {"instances": ["a"]}}, 404, id="version-2"),
    pytest.param("GET", "{model}/versions/2", {}, 404, id="version-2-status"),
    pytest.param("POST", "{model}:classify", {"json": {"instances": ["a"]}}, 404, id="unknown-verb"),
    pytest.param("POST", "{model}", {"json": {"instances": ["a"]}}, 404, id="post-without-verb"),
    pytest.param("GET", "{model}:predict", {}, (404, 405), id="get-predict"),
    pytest.param("PUT", "{model}:predict", {"json": {"instances": ["a"]}}, (404, 405), id="put-predict"),
    pytest.param("GET", "/v2/nothing", {}, 404, id="wrong-path"),
    pytest.param("GET", "/", {}, 404, id="root"),
    pytest.param("POST", "{model}:stream", {"json": {"text": 3}}, 400, id="stream-text-number"),
    pytest.param("POST", "{model}:predict", {"content": b"[" * 100_000 + b"]" * 100_000, "headers": JSON}, 400,
                 id="deeply-nested-json"),
    # What a web page can make a browser send without asking first (a form, text/plain, no type): 415.
    pytest.param("POST", "{model}:predict", {"content": b'{"instances": ["a"]}', "headers": {
        "content-type": "application/x-www-form-urlencoded", "origin": "https://attacker.example"}},
                 415, id="browser-form-content-type"),
    pytest.param("POST", "{model}:predict", {"content": b'{"instances": ["a"]}', "headers": {
        "content-type": "text/plain", "sec-fetch-site": "cross-site"}}, 415, id="browser-text-content-type"),
    pytest.param("POST", "{model}:predict", {"content": b'{"instances": ["a"]}', "headers": {"origin": "null"}},
                 415, id="browser-no-content-type"),
    pytest.param("POST", "{model}:stream", {"content": b'{"text": "a"}', "headers": {
        "content-type": "text/plain", "origin": "https://attacker.example"}}, 415, id="browser-stream-text"),
    # Costs beyond the server's limits are refused before they are queued.
    pytest.param("POST", "{model}:predict", {"json": {"signature_name": "n_best",
                                                      "instances": [{"text": "a", "n_best": 64}]}}, 400,
                 id="n-best-over-max-n-best"),
    pytest.param("POST", "{model}:predict", {"json": {"signature_name": "translate_with_prefix",
                                                      "instances": [{"text": "a", "prefix": "a " * 500}]}}, 400,
                 id="prefix-longer-than-the-output"),
]


@pytest.mark.parametrize("method, path, body, status", BAD_REQUESTS)
def test_a_bad_request_is_a_4xx_with_a_json_error(client, model, method, path, body, status):
    body = {k: v(10 << 20) if callable(v) else v for k, v in body.items()}
    assert_json_error(client.request(method, path.format(model=model), **body), status)


def test_a_client_that_is_not_a_browser_may_send_any_content_type_as_tf_serving_allows(client, model):
    body = b'{"instances": ["a"]}'
    for headers in ({"content-type": "application/x-www-form-urlencoded"}, {}):  # `curl -d`; no type at all
        assert client.post(f"{model}:predict", content=body, headers=headers).status_code == 200


def test_the_server_answers_correctly_after_the_bad_requests(client, model, expected_translations):
    response = client.post(f"{model}:predict", json={"instances": SENTENCES})
    assert response.status_code == 200, response.text
    assert response.json() == {"predictions": expected_translations}


# The request log


@pytest.mark.parametrize("method, path, body, status", [
    ("POST", "{model}:predict", {"instances": ["a"]}, 200),
    ("GET", "{model}", None, 200),
    ("GET", "{model}/metadata", None, 200),
    ("POST", "{model}:predict", {"instance": ["a"]}, 400),
    ("GET", "/nowhere", None, 404),
], ids=["predict", "status", "metadata", "bad-predict", "wrong-path"])
def test_each_request_logs_one_line_with_method_path_and_status(client, model, caplog, method, path, body, status):
    caplog.set_level(logging.INFO, logger="keras_transformer.serving")
    path = path.format(model=model)
    response = client.request(method, path, json=body)
    assert response.status_code == status
    lines = [r.getMessage() for r in caplog.records if r.name == "keras_transformer.serving"]
    assert len(lines) == 1, lines
    assert f" {method} {path} {status} " in lines[0]


# A stub model: queueing, timeouts, errors, batching and shutdown


class StubModel:
    """What the server needs of a `ServedModel`: `run` records each batch's texts, raises for the text "fail",
    answers each text upper-cased, and first waits for `gate` (open unless a test clears it)."""

    signatures = ["serving_default"]
    languages = ()  # a one-pair model: rows pass through `with_languages` unchanged

    def __init__(self, name="stub"):
        self.name = name
        self.gate = threading.Event()
        self.gate.set()
        self.batches = []
        self.lock = threading.Lock()

    def metadata(self):
        return {"model_spec": {"name": self.name, "signature_name": "", "version": "1"},
                "metadata": {"signature_def": {"signature_def": {}}}}

    def with_languages(self, rows):
        return rows

    def check(self, request):
        pass

    def run(self, key, rows):
        assert key == ("serving_default", ())
        texts = [row[0] for row in rows]
        with self.lock:
            self.batches.append(texts)
        assert self.gate.wait(WAIT)
        if "fail" in texts:
            raise RuntimeError("the stub failed at /secret/path")
        if "refused" in texts:
            raise ValueError("the stub refuses 'refused'")
        return [{"translation": text.upper()} for text in texts]

    def texts_run(self):
        with self.lock:
            return [text for batch in self.batches for text in batch]

    def batch_count(self):
        with self.lock:
            return len(self.batches)

    def first_batch_size(self):
        with self.lock:
            return len(self.batches[0]) if self.batches else 0


@contextlib.contextmanager
def serving(model, **settings):
    running = start_server(model, port=0, settings=ServerSettings(**settings))
    try:
        yield running
    finally:
        gate = getattr(model, "gate", None)
        if gate is not None:
            gate.set()
        running.stop()


def wait_until(condition, what):
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"waited {WAIT} s for {what}"
        time.sleep(0.005)


def queued(server):
    return server.app.state.serving.batcher.stats()["queued"]


class Post(threading.Thread):
    """A POST from its own thread; `response` once joined."""

    def __init__(self, url, payload):
        super().__init__(daemon=True)
        self.url, self.payload, self.response, self.error = url, payload, None, None
        self.start()

    def run(self):
        try:
            self.response = httpx.post(self.url, json=self.payload, timeout=WAIT)
        except Exception as error:
            self.error = error

    def result(self):
        self.join(WAIT)
        assert not self.is_alive() and self.error is None, self.error
        return self.response


def predict_url(server, model):
    return f"{server.url}/v1/models/{model.name}:predict"


def test_the_predict_route_runs_alone_over_an_app_state_without_a_server():
    import asyncio
    import json
    import types

    from keras_transformer.serving.app import AppState
    from keras_transformer.serving.app import predict

    stub = StubModel()
    state = AppState(stub, ServerSettings())
    state.start()
    try:
        request = types.SimpleNamespace(state=types.SimpleNamespace())
        response = asyncio.run(predict(state, {"instances": ["one", "two"]}, request))
        assert response.status_code == 200 and json.loads(response.body) == {"predictions": ["ONE", "TWO"]}
        assert request.state.sentences == 2
        with pytest.raises(RequestError, match="instances"):
            asyncio.run(predict(state, {"instances": "not a list"}, request))
    finally:
        asyncio.run(state.stop())


def test_a_client_refused_in_a_loop_has_its_refusals_held_while_accepted_requests_are_answered_at_once():
    stub = StubModel()
    hold = 3.0
    with serving(stub, refusals_per_s=0.25, refusal_delay_s=hold) as server:  # a burst of one refusal, then held
        url = predict_url(server, stub)
        malformed = {"instances": "not a list"}
        assert_json_error(httpx.post(url, json=malformed, timeout=WAIT), 400)  # the burst
        begin = time.monotonic()
        refused = Post(url, malformed)
        # Accepted requests from the same address are not held behind it: answered while the refusal waits.
        for text in ("one", "two"):
            response = httpx.post(url, json={"instances": [text]}, timeout=WAIT)
            assert response.status_code == 200 and response.json() == {"predictions": [text.upper()]}
        assert refused.is_alive(), "the refusal past the budget was answered at once"
        assert_json_error(refused.result(), 400)
        assert time.monotonic() - begin >= hold - 0.1  # held for the whole cap (the budget is 1 per 4 s)
    with serving(stub, refusals_per_s=0) as server:  # 0: no pacing
        url = predict_url(server, stub)
        begin = time.monotonic()
        for _ in range(4):
            assert_json_error(httpx.post(url, json={"instances": "not a list"}, timeout=WAIT), 400)
        assert time.monotonic() - begin < 2 * hold  # held, the three past the burst would take 3 x hold


def test_a_full_queue_is_a_429_with_retry_after_and_accepted_requests_are_answered():
    stub = StubModel()
    stub.gate.clear()
    with serving(stub, max_queued=2, max_instances=2, batch_timeout_ms=0) as server:
        url = predict_url(server, stub)
        running = Post(url, {"instances": ["a"]})
        wait_until(lambda: stub.batch_count() == 1, "the first request to run")
        waiting = [Post(url, {"instances": [text]}) for text in ("b", "c")]
        wait_until(lambda: queued(server) == 2, "two queued sentences")
        refused = httpx.post(url, json={"instances": ["d"]}, timeout=WAIT)
        assert_json_error(refused, 429)
        assert refused.headers["retry-after"].isdigit()
        stub.gate.set()
        for post, text in zip([running, *waiting], "abc"):
            response = post.result()
            assert response.status_code == 200, response.text
            assert response.json() == {"predictions": [text.upper()]}
        assert "d" not in stub.texts_run()
        again = httpx.post(url, json={"instances": ["d"]}, timeout=WAIT)
        assert again.status_code == 200 and again.json() == {"predictions": ["D"]}


def test_a_request_past_timeout_s_is_a_504_its_queued_sentences_are_dropped_and_the_server_goes_on():
    stub = StubModel()
    stub.gate.clear()
    with serving(stub, timeout_s=0.3, batch_timeout_ms=0) as server:
        url = predict_url(server, stub)
        slow = Post(url, {"instances": ["slow"]})
        wait_until(lambda: stub.batch_count() == 1, "the slow request to run")
        assert_json_error(httpx.post(url, json={"instances": ["queued"]}, timeout=WAIT), 504)
        assert_json_error(slow.result(), 504)
        stub.gate.set()
        response = httpx.post(url, json={"instances": ["next"]}, timeout=WAIT)
        assert response.status_code == 200, response.text
        assert response.json() == {"predictions": ["NEXT"]}
        assert "queued" not in stub.texts_run()


def test_an_error_in_the_model_is_a_500_that_names_only_a_request_id_and_the_server_goes_on(caplog):
    caplog.set_level(logging.INFO, logger="keras_transformer.serving")
    stub = StubModel()
    with serving(stub, batch_timeout_ms=0) as server:
        url = predict_url(server, stub)
        response = httpx.post(url, json={"instances": ["fail"]}, timeout=WAIT)
        assert_json_error(response, 500)
        request_id = response.headers["x-request-id"]
        # The client learns nothing of the failure (no exception text, no path); the log has it, by request id.
        assert response.json() == {"error": f"internal error (request id {request_id}; the server log has the "
                                            "details)"}
        logged = [r for r in caplog.records if request_id in r.getMessage()]
        assert any(r.exc_info and "/secret/path" in str(r.exc_info[1]) for r in logged)
        again = httpx.post(url, json={"instances": ["fine"]}, timeout=WAIT)
        assert again.status_code == 200 and again.json() == {"predictions": ["FINE"]}
        assert again.headers["x-request-id"] != request_id


def test_concurrent_requests_are_batched_and_each_gets_its_own_answer():
    stub = StubModel()
    stub.gate.clear()
    texts = [f"sentence {i}" for i in range(8)]
    with serving(stub, max_batch_size=32, batch_timeout_ms=0) as server:
        url = predict_url(server, stub)
        posts = [Post(url, {"instances": [text]}) for text in texts]
        wait_until(lambda: stub.batch_count() == 1 and stub.first_batch_size() + queued(server) == len(texts),
                   "every request to be running or queued")
        stub.gate.set()
        for post, text in zip(posts, texts):
            response = post.result()
            assert response.status_code == 200, response.text
            assert response.json() == {"predictions": [text.upper()]}
    assert stub.batch_count() < len(texts)
    assert sorted(stub.texts_run()) == sorted(texts)


def _refuses_connections(url):
    host, port = url.removeprefix("http://").rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def test_stop_answers_every_accepted_request_then_takes_no_more():
    stub = StubModel()
    stub.gate.clear()
    texts = [f"sentence {i}" for i in range(6)]
    server = start_server(stub, port=0, settings=ServerSettings(timeout_s=WAIT, batch_timeout_ms=0))
    try:
        url = predict_url(server, stub)
        posts = [Post(url, {"instances": [text]}) for text in texts]
        wait_until(lambda: stub.batch_count() == 1 and stub.first_batch_size() + queued(server) == len(texts),
                   "every request to be running or queued")
        stopper = threading.Thread(target=server.stop, args=(WAIT,), daemon=True)
        stopper.start()
        wait_until(lambda: _refuses_connections(server.url), "the server to stop listening")
        stub.gate.set()
        for post, text in zip(posts, texts):
            response = post.result()
            assert response.status_code == 200, response.text
            assert response.json() == {"predictions": [text.upper()]}
        stopper.join(WAIT)
        assert not stopper.is_alive()
        with pytest.raises(httpx.ConnectError):
            httpx.post(url, json={"instances": ["late"]}, timeout=WAIT)
    finally:
        stub.gate.set()
        server.stop()


def test_a_request_the_translator_refuses_fails_no_other_request_of_its_batch():
    stub = StubModel()
    stub.gate.clear()
    # The batch closes when it holds both sentences; the timeout only bounds the wait.
    with serving(stub, max_batch_size=2, batch_timeout_ms=10_000) as server:
        url = predict_url(server, stub)
        good, bad = Post(url, {"instances": ["good"]}), Post(url, {"instances": ["refused"]})
        wait_until(lambda: stub.batch_count() == 1, "the shared batch to run")
        stub.gate.set()
        assert_json_error(bad.result(), 400)
        assert "the stub refuses" in bad.result().json()["error"]
        assert good.result().status_code == 200 and good.result().json() == {"predictions": ["GOOD"]}
    # They shared a batch, which failed on the refused input; each then ran alone.
    assert sorted(stub.batches[0]) == ["good", "refused"] and sorted(stub.batches[1:]) == [["good"], ["refused"]]


def test_what_can_be_refused_before_queueing_never_reaches_the_batcher(served_model):
    shared = ServedModel(served_model.translator, "shared", batch_size=2, continuous=False,
                         signatures=("serving_default", "n_best", "translate_with_prefix"), max_n_best=2,
                         max_request_tokens=200)
    with serving(shared, max_batch_size=2) as server:
        url = predict_url(server, shared)
        for body in ({"signature_name": "n_best", "instances": [{"text": "a", "n_best": 3}]},
                     {"signature_name": "translate_with_prefix", "instances": [{"text": "a", "prefix": "b " * 99}]},
                     b'{"instances": ["\\ud800"]}'):  # a lone surrogate: no UTF-8 text has it
            sent = dict(content=body, headers=JSON) if isinstance(body, bytes) else dict(json=body)
            assert_json_error(httpx.post(url, timeout=WAIT, **sent), 400)
        costly = httpx.post(url, json={"instances": [" ".join(SENTENCES)] * 8}, timeout=WAIT)
        assert_json_error(costly, 413)
        assert "--max-request-tokens" in costly.json()["error"] and "at most 200" in costly.json()["error"]
        assert server.app.state.serving.batcher.stats()["batches"] == 0
        assert httpx.post(url, json={"instances": [SENTENCES[0]]}, timeout=WAIT).status_code == 200


def test_the_cost_check_decides_as_tokenizing_would_and_tokenizes_only_between_its_bounds(served_model,
                                                                                           monkeypatch):
    import keras_transformer.serving.served_model as served_module
    from keras_transformer.decoding.translator import tokenize_rows

    translator = served_model.translator
    longest, output = translator.parts.max_length, translator.max_length
    calls = []
    monkeypatch.setattr(served_module, "tokenize_rows", lambda *a: calls.append(len(a[1])) or tokenize_rows(*a))

    def exact(texts):
        return sum(min(len(row) + 2, longest) + output for row in tokenize_rows(translator.source_tokenizer, texts))

    def check(texts, limit):
        calls.clear()
        model = ServedModel(translator, "costs", batch_size=2, continuous=False, max_request_tokens=limit)
        try:
            model._check_cost(texts, 1)
            return "accepted", sum(calls)
        except RequestError as error:
            assert error.status == 413 and f"at most {limit:,}" in str(error)
            return "refused", sum(calls)

    texts = SENTENCES * 3  # between the bounds: decided as the tokenized cost decides it
    assert check(texts, exact(texts)) == ("accepted", len(texts))
    assert check(texts, exact(texts) - 1)[0] == "refused"
    assert check(["a"], 1000) == ("accepted", 0)  # under the upper bound: nothing tokenized
    many_words = [" ".join(["word"] * 5000)] * 64  # over the lower bound: refused with nothing tokenized
    assert check(many_words, 64 * (longest + output) - 1) == ("refused", 0)


# keras-transformer serve

READY = re.compile(r"serving '(?P<name>[^']+)' at (?P<url>http://127\.0\.0\.1:\d+)/v1/models/(?P=name)\s")


class ServeCommand:
    """`keras-transformer serve ARGS` in a subprocess; `url` and `name` once its ready line is read."""

    def __init__(self, *args):
        command = [sys.executable, "-m", "keras_transformer.cli", "serve", *args]
        self.process = subprocess.Popen(command, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True, env=os.environ.copy())
        self.stderr, self._lines = [], queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stderr:
            self.stderr.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def wait_ready(self):
        deadline = time.monotonic() + STARTUP
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no ready line within {STARTUP} s:\n{''.join(self.stderr)}")
            if line is None:
                pytest.fail(f"exited with {self.process.wait()} before listening:\n{''.join(self.stderr)}")
            match = READY.search(line)
            if match:
                self.url, self.name = match["url"], match["name"]
                return

    def terminate(self):
        """SIGTERM; the exit status, or None if it did not exit within WAIT s."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(WAIT)
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


@pytest.fixture(scope="module")
def served_by_the_command(tiny_run_dir):
    """`keras-transformer serve RUN --port 0 --no-warmup`: its name, a predict answer, then its SIGTERM exit."""
    command = ServeCommand(tiny_run_dir, "--port", "0")  # the default flags (warm-up included)
    try:
        command.wait_ready()
        response = httpx.post(f"{command.url}/v1/models/{command.name}:predict", json={"instances": SENTENCES},
                              timeout=WAIT)
        status = command.terminate()
        return {"name": command.name, "response": response, "exit": status, "stderr": "".join(command.stderr)}
    finally:
        command.kill()


def test_the_command_serves_the_run_under_its_directory_name(served_by_the_command, expected_translations):
    assert served_by_the_command["name"] == "tiny"
    response = served_by_the_command["response"]
    assert response.status_code == 200, response.text
    assert response.json() == {"predictions": expected_translations}


def test_the_command_stops_gracefully_on_sigterm(served_by_the_command):
    assert served_by_the_command["exit"] is not None, "still running after SIGTERM"
    assert "Application shutdown complete" in served_by_the_command["stderr"]


def test_the_command_exits_0_after_sigterm(served_by_the_command):
    assert served_by_the_command["exit"] == 0


def test_model_name_changes_the_route(tiny_run_dir):
    command = ServeCommand(tiny_run_dir, "--port", "0", "--no-warmup", "--model-name", "custom")
    try:
        command.wait_ready()
        assert command.name == "custom"
        response = httpx.post(f"{command.url}/v1/models/custom:predict", json={"instances": ["a"]}, timeout=WAIT)
        assert response.status_code == 200, response.text
        (translation,) = response.json()["predictions"]
        assert isinstance(translation, str)
        assert_json_error(httpx.post(f"{command.url}/v1/models/tiny:predict", json={"instances": ["a"]},
                                     timeout=WAIT), 404)
        assert command.terminate() is not None, "still running after SIGTERM"
    finally:
        command.kill()


def test_after_warm_up_no_request_compiles_anything(tiny_run_dir, tmp_path):
    """Every signature, batch at a time, at two sentences per call: warm-up compiles each shape the server can
    run, then requests of every n_best, prefix width, size and text length compile nothing (XLA's persistent cache
    gains no entry: each compiled program writes one)."""
    cache = tmp_path / "compiled"
    command = ServeCommand(tiny_run_dir, "--port", "0", "--signatures", "all", "--batching", "static",
                           "--max-batch-size", "2", "--max-n-best", "3", "--compile-cache", str(cache))
    try:
        command.wait_ready()
        warmed = sorted(os.listdir(cache / "tensorflow"))
        assert warmed, "the warm-up kept nothing compiled"
        url = f"{command.url}/v1/models/{command.name}:predict"
        long_text = " ".join(SENTENCES * 20)
        bodies = [{"signature_name": "n_best", "instances": [{"text": t, "n_best": n} for t in texts]}
                  for n in (1, 2, 3) for texts in (SENTENCES[:1], SENTENCES[:2], [long_text] * 2)]
        bodies += [{"signature_name": "translate_with_prefix",
                    "instances": [{"text": t, "prefix": " ".join(["a"] * width)} for t in texts]}
                   for width in (0, 1, 2, 5) for texts in (SENTENCES[:1], [long_text, "b"])]
        bodies += [{"signature_name": name, "instances": texts} for name in ("serving_default", "align")
                   for texts in (SENTENCES[:1], SENTENCES, [long_text], SENTENCES + [long_text])]
        bodies += [{"signature_name": "score", "inputs": {"text": SENTENCES, "translation": SENTENCES}}]
        for body in bodies:
            response = httpx.post(url, json=body, timeout=WAIT)
            assert response.status_code == 200, (body, response.text)
        assert sorted(os.listdir(cache / "tensorflow")) == warmed
        assert command.terminate() is not None
    finally:
        command.kill()
    text = "".join(command.stderr)
    assert "warming up serving_default at " in text and "n_best at " in text and "align at " in text, text


def test_a_host_that_is_not_the_servers_is_a_403_unless_allowed(served_model):
    with serving(served_model, allow_hosts=("translate.internal",)) as server:
        url = predict_url(server, served_model)
        port = server.url.rsplit(":", 1)[1]
        for host, status in ((f"127.0.0.1:{port}", 200), (f"localhost:{port}", 200), ("[::1]", 200),
                             ("translate.internal", 200), ("attacker.example", 403), (f"attacker.example:{port}", 403),
                             ("10.1.2.3", 403)):
            response = httpx.post(url, json={"instances": ["a"]}, headers={"Host": host}, timeout=WAIT)
            assert response.status_code == status, (host, response.text)
        assert "--allow-host" in response.json()["error"]


def test_host_allowed_follows_the_address_listened_on():
    from keras_transformer.serving.app import host_allowed

    assert host_allowed("10.0.0.5:8501", "0.0.0.0") and host_allowed("localhost", "0.0.0.0")
    assert not host_allowed("rebound.example", "0.0.0.0") and host_allowed("rebound.example", "0.0.0.0", ("*",))
    assert host_allowed("10.0.0.5", "10.0.0.5") and not host_allowed("localhost", "10.0.0.5")
    assert host_allowed(None, "127.0.0.1") and host_allowed("anything", None)


def test_connections_past_max_connections_get_503_and_a_slow_body_gets_408(served_model):
    with serving(served_model, max_connections=2, body_timeout_s=0.5) as server:
        url = predict_url(server, served_model)
        host, port = server.url.removeprefix("http://").rsplit(":", 1)
        slow = socket.create_connection((host, int(port)), timeout=WAIT)
        idle = socket.create_connection((host, int(port)), timeout=WAIT)
        try:  # a body that never comes: answered 408 once body_timeout_s passed, not held forever
            path = url.removeprefix(server.url)
            slow.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                         "Content-Length: 100\r\n\r\n{\"instances\"".encode())
            time.sleep(0.2)  # both connections accepted
            refused = httpx.post(url, json={"instances": ["a"]}, timeout=WAIT)
            assert refused.status_code == 503 and "--max-connections" in refused.json()["error"]
            answer = b""
            while b"--body-timeout-s" not in answer:  # the headers and the body may come in separate segments
                received = slow.recv(4096)
                if not received:
                    break
                answer += received
            answer = answer.decode()
            assert answer.startswith("HTTP/1.1 408") and "--body-timeout-s" in answer, answer
        finally:
            slow.close()
            idle.close()
        wait_until(lambda: httpx.post(url, json={"instances": ["a"]}, timeout=WAIT).status_code == 200,
                   "a connection to be free again")
