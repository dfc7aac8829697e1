"""The CTranslate2 translator's n-best lists, scores, prefixes and streaming, against CTranslate2's own
`translate_batch` and against our model on the same weights."""

import os

import numpy as np
import pytest

pytest.importorskip("ctranslate2")

from keras_transformer import cli  # noqa: E402
from keras_transformer.decoding.translator import encode_sources  # noqa: E402
from keras_transformer.translators import load_translator  # noqa: E402
from tests.export.helpers import SENTENCES  # noqa: E402

TEXTS = SENTENCES[:4]


@pytest.fixture(scope="module")
def translators(run_dir, tmp_path_factory):
    os.environ.setdefault("CT2_USE_MKL", "0")
    out = str(tmp_path_factory.mktemp("ct2-outputs") / "ct2")
    assert cli.main(["export", run_dir, "--ctranslate2", out]) == 0
    return load_translator(run_dir), load_translator(out)


def test_ctranslate2_scores_equal_our_models_log_probabilities(translators):
    run, ct2 = translators
    greedy = run.translate(TEXTS, beam_size=1, max_length=10)
    scored = ct2.score(TEXTS, greedy)
    ours = run.score(TEXTS, greedy)
    assert [s["tokens"] for s in scored] == [o["tokens"] for o in ours]
    # CTranslate2's softmax runs over the whole vocabulary; compare with our model's full forward pass.
    source_ids = encode_sources(run.source_tokenizer, TEXTS, run.parts.max_length)
    end, start = run.target_tokenizer.end_id, run.target_tokenizer.start_id
    for row, result in enumerate(scored):
        ids = [run.target_tokenizer.vocab.index(t) for t in result["tokens"]]
        decoder_inputs = np.array([[start] + ids[:-1]], "int32")
        logits = np.asarray(run.model({"encoder_inputs": source_ids[row: row + 1],
                                       "decoder_inputs": decoder_inputs}))[0].astype("float64")
        shifted = logits - logits.max(-1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
        expected = [log_probs[i, t] for i, t in enumerate(ids)]
        assert result["token_scores"] == pytest.approx(expected, abs=2e-3)
        assert ids[-1] == end


def test_ctranslate2_n_best_prefix_and_stream(translators):
    run, ct2 = translators
    lists = ct2.translate_n_best(TEXTS + [""], 3)
    assert [hyps[0][0] for hyps in lists] == ct2.translate(TEXTS + [""], beam_size=3)
    assert lists[-1] == [("", 0.0)] and all(len(hyps) == 3 for hyps in lists[:-1])
    prefixes = ["1999-", "", "20", "12"]
    assert ct2.translate_with_prefix(TEXTS, prefixes, beam_size=1) == run.translate_with_prefix(TEXTS, prefixes,
                                                                                                beam_size=1)
    assert ["".join(ct2.stream(t)) for t in TEXTS] == ct2.translate(TEXTS, beam_size=1)
