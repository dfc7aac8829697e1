"""`serve` over an imported NLLB-style checkpoint: the language codes are request fields (TF Serving's named inputs)
with defaults from the command line, sentences into different languages decode in one batch (the engine's forced
first token is per row), and what transformers generates is what the server answers."""

import json

import httpx
import pytest

pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")
pytest.importorskip("torch")

from tests.importers.m2m_100_checkpoint import MAX_NEW  # noqa: E402
from tests.importers.m2m_100_checkpoint import make_m2m_100_checkpoint  # noqa: E402
from tests.importers.m2m_100_checkpoint import reference_translations  # noqa: E402
from tests.importers.m2m_100_checkpoint import sentences  # noqa: E402

WAIT = 120
TARGETS = ["deu_Latn", "fra_Latn", "spa_Latn"]


@pytest.fixture(scope="module")
def nllb(tmp_path_factory):
    """`(run directory, transformers model, transformers tokenizer)` of a small NLLB-style checkpoint."""
    from keras_transformer import cli as commands

    checkpoint = str(tmp_path_factory.mktemp("nllb"))
    model, tokenizer = make_m2m_100_checkpoint(checkpoint)
    run_dir = str(tmp_path_factory.mktemp("runs") / "nllb")
    assert commands.main(["import", checkpoint, "--output", run_dir]) == 0
    return run_dir, model, tokenizer


def _served(run_dir, beam_size, continuous=True, target_language=None):
    from keras_transformer.serving import ServedModel
    from keras_transformer.translators import load_translator

    return ServedModel(load_translator(run_dir), "nllb", decoding={"beam_size": beam_size, "max_length": MAX_NEW},
                       batch_size=4, continuous=continuous, target_language=target_language)


def _predict(url, body):
    return httpx.post(f"{url}/v1/models/nllb:predict", json=body, timeout=WAIT)


@pytest.mark.parametrize("beam_size, continuous", [(1, True), (4, True), (4, False)])
def test_sentences_into_several_languages_decode_together_as_transformers(nllb, beam_size, continuous):
    from keras_transformer.serving import start_server

    run_dir, model, tokenizer = nllb
    texts = sentences(24, seed=11)
    targets = [TARGETS[i % 3] for i in range(len(texts))]
    expected = reference_translations(model, tokenizer, texts, "eng_Latn", targets, beam_size)
    served = _served(run_dir, beam_size, continuous, target_language="fra_Latn")
    assert (served.engine is not None) == continuous
    with start_server(served) as server:
        rows = [{"text": text, "source_language": "eng_Latn", "target_language": target}
                for text, target in zip(texts, targets)]
        response = _predict(server.url, {"instances": rows[:12]})  # more sentences than the 4 slots
        assert response.status_code == 200, response.text
        answered = response.json()["predictions"]
        # Columnar, with one source code for every sentence, while other requests decode beside it.
        response = _predict(server.url, {"inputs": {"text": texts[12:], "source_language": "eng_Latn",
                                                    "target_language": targets[12:]}})
        assert response.status_code == 200, response.text
        answered += response.json()["outputs"]
        assert answered == expected
        # No target_language: the server's --target-lang (fra_Latn); no source_language: the model's default.
        default = reference_translations(model, tokenizer, texts[:3], "eng_Latn", ["fra_Latn"] * 3, beam_size)
        assert _predict(server.url, {"instances": texts[:3]}).json() == {"predictions": default}


def test_bad_language_codes_are_refused_per_request_and_the_server_goes_on(nllb):
    from keras_transformer.serving import start_server

    run_dir, model, tokenizer = nllb
    served = _served(run_dir, 1)  # no --target-lang: every request names its target language
    with start_server(served) as server:
        inputs = served.metadata()["metadata"]["signature_def"]["signature_def"]["serving_default"]["inputs"]
        assert set(inputs) == {"text", "source_language", "target_language"}
        response = _predict(server.url, {"instances": [{"text": "the house", "target_language": "fra_latn"}]})
        assert response.status_code == 400 and "fra_latn" in response.json()["error"]
        assert "closest: fra_Latn" in response.json()["error"]
        response = _predict(server.url, {"instances": ["the house"]})
        assert response.status_code == 400 and "target_language is required" in response.json()["error"]
        response = _predict(server.url, {"inputs": {"text": ["a", "b"], "target_language": ["deu_Latn"]}})
        assert response.status_code == 400 and "list of 2 strings" in response.json()["error"]
        response = _predict(server.url, {"instances": [{"text": "a", "target_language": 7}]})
        assert response.status_code == 400 and "must be a string" in response.json()["error"]
        response = _predict(server.url, {"signature_name": "n_best", "instances": ["a"]})
        assert response.status_code == 400 and "serves serving_default" in response.json()["error"]
        # The server goes on, and streams into a chosen language as it translates into it.
        text = sentences(1, seed=3)[0]
        expected = reference_translations(model, tokenizer, [text], "deu_Latn", ["spa_Latn"], 1)
        response = _predict(server.url, {"instances": [{"text": text, "source_language": "deu_Latn",
                                                        "target_language": "spa_Latn"}]})
        assert response.json() == {"predictions": expected}
        with httpx.stream("POST", f"{server.url}/v1/models/nllb:stream", timeout=WAIT,
                          json={"text": text, "source_language": "deu_Latn", "target_language": "spa_Latn"}) as stream:
            lines = [line for line in stream.iter_lines() if line]
        assert json.loads(lines[-1]) == {"translation": expected[0], "done": True}, lines


def test_language_flags_are_checked_when_the_server_starts(nllb, tiny_run_dir):
    with pytest.raises(ValueError, match="--target-lang: unknown language code 'french'"):
        _served(nllb[0], 1, target_language="french")
    from keras_transformer.serving import ServedModel
    from keras_transformer.translators import load_translator

    with pytest.raises(ValueError, match="one language pair"):
        ServedModel(load_translator(tiny_run_dir), "tiny", target_language="deu_Latn")
