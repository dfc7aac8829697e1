"""The SavedModel's decoding-output signatures (`n_best`, `score`, `translate_with_prefix`) give what the run's
Python translator gives on the same weights, and the served SavedModel answers them."""

import pytest

from keras_transformer.translators import load_translator
from tests.export.helpers import SENTENCES

TEXTS = SENTENCES[:4] + [""]


@pytest.fixture(scope="module")
def run_translator(run_dir):
    return load_translator(run_dir)


def test_the_saved_model_has_the_signatures(saved_translator):
    assert {"n_best", "score", "translate_with_prefix"} <= set(saved_translator.signatures)
    assert [saved_translator.supports(m) for m in ("translate_n_best", "score", "translate_with_prefix", "align",
                                                    "stream")] == [True, True, True, False, False]


def test_n_best_equals_the_run_translators(saved_translator, run_translator):
    k = saved_translator.extra_beam_size
    expected = run_translator.translate_n_best(TEXTS, 3, beam_size=k)
    got = saved_translator.translate_n_best(TEXTS, 3)
    assert [[t for t, _ in hyps] for hyps in got] == [[t for t, _ in hyps] for hyps in expected]
    for g, e in zip(got, expected):
        assert [s for _, s in g] == pytest.approx([s for _, s in e], abs=1e-3)
    with pytest.raises(ValueError, match="re-export with `--beam-size"):
        saved_translator.translate_n_best(TEXTS, k + 1)


def test_score_equals_the_run_translators(saved_translator, run_translator):
    greedy = run_translator.translate(TEXTS, beam_size=1)
    for normalize in (False, True):
        expected = run_translator.score(TEXTS, greedy, normalize=normalize)
        got = saved_translator.score(TEXTS, greedy, normalize=normalize)
        assert [g["tokens"] for g in got] == [e["tokens"] for e in expected]
        assert [g["score"] for g in got] == pytest.approx([e["score"] for e in expected], abs=1e-3)


def test_prefix_equals_the_run_translators(saved_translator, run_translator):
    prefixes = ["1999-", "", "20", "12", "1970"]
    got = saved_translator.translate_with_prefix(TEXTS, prefixes)
    assert got == run_translator.translate_with_prefix(TEXTS, prefixes)
    assert all(out.startswith(p) for out, p in zip(got, prefixes))
