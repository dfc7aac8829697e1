import keras
import numpy as np
import pytest

from keras_transformer.decoding import beam_search, gnmt_length_penalty, greedy_decode
from tests.backend_helpers import compile_function
from tests.decoding.helpers import (
    END,
    START,
    VARIANTS,
    check_padding_after_end,
    digit_sources,
    pad_to,
    penalized,
    sequence_log_prob,
    sources,
    tiny_model,
    to_numpy,
    trained_reversal_model,
)


def test_gnmt_length_penalty():
    assert float(gnmt_length_penalty(1, 0.6)) == pytest.approx(1.0)
    assert float(gnmt_length_penalty(7, 0.5)) == pytest.approx(2.0**0.5)
    assert float(gnmt_length_penalty(30, 0.0)) == 1.0


@pytest.mark.parametrize("variant", VARIANTS.values(), ids=VARIANTS.keys())
def test_beam_size_one_equals_greedy(variant):
    model = tiny_model(**variant)
    src = sources()
    greedy = pad_to(greedy_decode(model, src, 8, START, END), 8)
    beam = pad_to(beam_search(model, src, 8, START, END, beam_size=1, length_penalty=0.6), 8)
    np.testing.assert_array_equal(beam, greedy)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_best_hypothesis_scores_at_least_as_well_as_greedy(alpha):
    model = trained_reversal_model()
    src = digit_sources(batch=8, seed=3)
    greedy = to_numpy(greedy_decode(model, src, 8, START, END))
    tokens, scores = beam_search(model, src, 8, START, END, beam_size=4, length_penalty=alpha, return_scores=True)
    tokens, scores = to_numpy(tokens), to_numpy(scores)
    assert scores.shape == (8,) and scores.dtype == np.float32
    check_padding_after_end(tokens, 8)
    beam_scores, greedy_scores = [], []
    for row in range(len(src)):
        beam_scores.append(penalized(*sequence_log_prob(model, src[row], tokens[row]), alpha))
        greedy_scores.append(penalized(*sequence_log_prob(model, src[row], greedy[row]), alpha))
        assert scores[row] == pytest.approx(beam_scores[row], abs=1e-4)  # the returned score is the real one
    # A beam of 4 can prune greedy's path (no guarantee per row: the model trained on PyTorch has one such row),
    # but it finds at least as good a hypothesis for nearly every row and in total.
    better = [b >= g - 1e-5 for b, g in zip(beam_scores, greedy_scores)]
    assert sum(better) >= len(src) - 1, (beam_scores, greedy_scores)
    assert sum(beam_scores) >= sum(greedy_scores) - 1e-4


def test_padded_batch_rows_match_decoding_alone():
    model = trained_reversal_model()
    src = digit_sources(batch=4, seed=4)
    batched, batched_scores = beam_search(model, src, 8, START, END, beam_size=3, return_scores=True)
    batched = pad_to(batched, 8)
    for row in range(len(src)):
        alone_src = src[row:row + 1, : int((src[row] != 0).sum())]
        alone, alone_scores = beam_search(model, alone_src, 8, START, END, beam_size=3, return_scores=True)
        np.testing.assert_array_equal(batched[row:row + 1], pad_to(alone, 8))
        np.testing.assert_allclose(to_numpy(batched_scores)[row], to_numpy(alone_scores)[0], atol=1e-4)


def test_stops_early_with_the_same_results_as_a_fixed_step_count():
    model = trained_reversal_model()
    src = digit_sources()
    early, early_scores = beam_search(model, src, 10, START, END, return_scores=True)
    fixed, fixed_scores = beam_search(model, src, 10, START, END, return_scores=True, stop_early=False)
    np.testing.assert_array_equal(pad_to(early, 10), pad_to(fixed, 10))
    np.testing.assert_allclose(to_numpy(early_scores), to_numpy(fixed_scores), atol=1e-6)
    assert early.shape[1] < 10
    check_padding_after_end(early, 10)


def test_xla_compiled_function_matches_eager():
    model = tiny_model(num_layers=1, **VARIANTS["pre-norm-shared-tied"])  # compiles faster
    src = sources()
    eager, eager_scores = beam_search(model, src, 6, START, END, beam_size=3, return_scores=True)
    eager = pad_to(eager, 6)

    def decode(ids):
        return beam_search(model, ids, 6, START, END, beam_size=3, return_scores=True)

    # The backend's compiler (XLA on TensorFlow and JAX); input signature [None, None]: see test_portability.py.
    tokens, scores = compile_function(decode)(src)
    if keras.backend.backend() != "torch":  # compiled: full width (PyTorch runs it eagerly, trimmed)
        assert tuple(tokens.shape) == (4, 6)
    np.testing.assert_array_equal(pad_to(tokens, 6), eager)
    np.testing.assert_allclose(to_numpy(scores), to_numpy(eager_scores), atol=1e-4)


def test_eager_callers_compile_once_for_every_length_penalty():
    from keras_transformer.decoding import compiled

    model = tiny_model(num_layers=1, **VARIANTS["pre-norm-shared-tied"])
    src = sources()
    for alpha in (0.0, 1.5):  # the alpha is an input of the compiled loop: each gives its own eager results
        eager, eager_scores = beam_search(model, src, 6, START, END, beam_size=3, length_penalty=alpha,
                                          return_scores=True)
        tokens, scores = beam_search(model, src, 6, START, END, beam_size=3, length_penalty=alpha,
                                     return_scores=True, jit_compile=True)
        np.testing.assert_array_equal(pad_to(tokens, 6), pad_to(eager, 6))
        np.testing.assert_allclose(to_numpy(scores), to_numpy(eager_scores), atol=1e-4)
    assert len(compiled._CACHE[model]) == 1


def test_arguments_are_checked():
    model = tiny_model()
    src = sources()
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model, src, 4, START, END, beam_size=0)
    with pytest.raises(TypeError, match="beam_size"):
        beam_search(model, src, 4, START, END, beam_size=2.0)
    with pytest.raises(ValueError, match="length_penalty"):
        beam_search(model, src, 4, START, END, length_penalty=-0.5)
    with pytest.raises(ValueError, match="max_length"):
        beam_search(model, src, -1, START, END)
    with pytest.raises(ValueError, match="start_id"):
        beam_search(model, src, 4, 99, END)
