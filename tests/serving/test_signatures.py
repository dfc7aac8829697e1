"""The decoding-output signatures over HTTP (n_best, score, prefix, align) and :stream, each equal to the Python
API on the same run, in row and columnar formats; bad options get a 400 and the server answers the next request."""

import json

import httpx
import pytest

from keras_transformer.serving import ServerSettings
from keras_transformer.serving import load_served_model
from keras_transformer.serving import start_server
from keras_transformer.translators import load_translator
from tests.export.helpers import SENTENCES
from tests.export.helpers import write_tiny_run

TEXTS = SENTENCES[:3]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    run_dir = write_tiny_run(tmp_path_factory.mktemp("signatures") / "tiny")
    served = load_served_model(run_dir, settings=ServerSettings(signatures=None, max_n_best=4))
    with start_server(served) as server:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            client.model = f"/v1/models/{served.name}"
            yield client, load_translator(run_dir)


def predict(client, body):
    response = client.post(client.model + ":predict", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def test_metadata_lists_every_signature_of_a_run(setup):
    client, _ = setup
    signatures = client.get(client.model + "/metadata").json()["metadata"]["signature_def"]["signature_def"]
    assert set(signatures) == {"serving_default", "n_best", "score", "translate_with_prefix", "align"}
    assert set(signatures["score"]["inputs"]) == {"text", "translation", "normalize"}
    assert set(signatures["n_best"]["outputs"]) == {"translations", "scores"}


def test_n_best_rows_and_columns_equal_the_python_api(setup):
    client, translator = setup
    # Every n_best request decodes --max-n-best (4) hypotheses, one compiled program: these are its first 2.
    expected = [hyps[:2] for hyps in translator.translate_n_best(TEXTS, 4)]
    rows = predict(client, {"signature_name": "n_best", "instances": [{"text": t, "n_best": 2} for t in TEXTS]})
    columns = predict(client, {"signature_name": "n_best", "inputs": {"text": TEXTS, "n_best": 2}})
    for row, hyps in zip(rows["predictions"], expected):
        assert row["translations"] == [h for h, _ in hyps]
        assert row["scores"] == pytest.approx([s for _, s in hyps], abs=1e-5)
    assert columns["outputs"]["translations"] == [r["translations"] for r in rows["predictions"]]
    # The first of the n best is the beam's best (the beam widens to --max-n-best).
    assert [r["translations"][0] for r in rows["predictions"]] == translator.translate(TEXTS, beam_size=4)


def test_score_of_the_greedy_translation(setup):
    client, translator = setup
    greedy = translator.translate(TEXTS, beam_size=1)
    expected = translator.score(TEXTS, greedy, normalize=True)
    body = {"signature_name": "score", "inputs": {"text": TEXTS, "translation": greedy, "normalize": True}}
    outputs = predict(client, body)["outputs"]
    assert outputs["score"] == pytest.approx([e["score"] for e in expected], abs=1e-5)
    assert outputs["tokens"] == [e["tokens"] for e in expected]


def test_prefix_is_kept_and_align_has_a_pair_per_target_word(setup):
    client, translator = setup
    prefixes = ["1999-", "", "2026-11"]
    predictions = predict(client, {"signature_name": "translate_with_prefix",
                                   "instances": [{"text": t, "prefix": p} for t, p in zip(TEXTS, prefixes)]})
    assert predictions["predictions"] == translator.translate_with_prefix(TEXTS, prefixes)
    assert all(out.startswith(p) for out, p in zip(predictions["predictions"], prefixes))
    aligned = predict(client, {"signature_name": "align", "instances": TEXTS})["predictions"]
    for text, row in zip(TEXTS, aligned):
        pairs = [tuple(map(int, pair.split("-"))) for pair in row["alignment"].split()]
        assert [j for _, j in pairs] == list(range(len(row["translation"].split())))
        assert all(0 <= i < len(text.split()) for i, _ in pairs)
    assert [r["translation"] for r in aligned] == translator.translate(TEXTS)


@pytest.mark.parametrize("body", [
    {"signature_name": "n_best", "instances": [{"text": "a", "n_best": -1}]},
    {"signature_name": "n_best", "instances": [{"text": "a", "n_best": 2}, {"text": "b", "n_best": 3}]},
    {"signature_name": "score", "instances": ["a"]},
    {"signature_name": "score", "inputs": {"text": ["a", "b"], "translation": ["c"]}},
    {"signature_name": "translate_with_prefix", "instances": [{"text": "a", "prefix": "1 " * 100}]},
], ids=["negative-n-best", "mixed-options", "score-without-translation", "ragged-columns", "prefix-too-long"])
def test_bad_signature_input_is_a_400_and_the_server_goes_on(setup, body):
    client, translator = setup
    response = client.post(client.model + ":predict", json=body)
    assert response.status_code == 400 and response.json()["error"]
    assert predict(client, {"instances": TEXTS[:1]})["predictions"] == translator.translate(TEXTS[:1])


def test_stream_sends_pieces_then_the_whole_translation(setup):
    client, translator = setup
    with client.stream("POST", client.model + ":stream", json={"text": TEXTS[0]}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in response.iter_lines() if line]
    assert lines[-1]["done"] is True
    assert "".join(line["text"] for line in lines[:-1]) == lines[-1]["translation"]
    assert lines[-1]["translation"] == translator.translate(TEXTS[:1], beam_size=1)[0]
    bad = client.post(client.model + ":stream", json={"text": 3})
    assert bad.status_code == 400 and bad.json()["error"]
