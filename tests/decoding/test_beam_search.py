import functools

import keras
import numpy as np
import pytest

from keras_transformer import build_transformer
from keras_transformer.decoding import gnmt_length_penalty
from keras_transformer.models.transformer_parts import TransformerParts
from tests.backend_helpers import compile_function
from tests.decoding.helpers import END
from tests.decoding.helpers import START
from tests.decoding.helpers import TINY
from tests.decoding.helpers import VARIANTS
from tests.decoding.helpers import check_padding_after_end
from tests.decoding.helpers import digit_sources
from tests.decoding.helpers import eager_beam_search as beam_search
from tests.decoding.helpers import eager_greedy_decode as greedy_decode
from tests.decoding.helpers import full_forward_logits
from tests.decoding.helpers import pad_to
from tests.decoding.helpers import penalized
from tests.decoding.helpers import sequence_log_prob
from tests.decoding.helpers import sources
from tests.decoding.helpers import tiny_model
from tests.decoding.helpers import to_numpy
from tests.decoding.helpers import trained_reversal_model


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


# Not on PyTorch, where `jit_compile=True` is opt-in (not the default) and torch.compile of this 6-step loop alone
# takes over three minutes on two CPU cores.
@pytest.mark.skipif(keras.backend.backend() == "torch", reason="torch.compile of the loop takes minutes on CPU")
@pytest.mark.parametrize("rule", ["gnmt", "transformers"])
def test_eager_callers_compile_once_for_every_length_penalty(rule):
    from keras_transformer.decoding import compiled_decoders

    model = tiny_model(num_layers=1, **VARIANTS["pre-norm-shared-tied"])
    src = sources()
    for alpha in (0.0, 1.5):  # the alpha is an input of the compiled loop: each gives its own eager results
        eager, eager_scores = beam_search(model, src, 6, START, END, beam_size=3, length_penalty=alpha,
                                          return_scores=True, length_penalty_rule=rule)
        tokens, scores = beam_search(model, src, 6, START, END, beam_size=3, length_penalty=alpha,
                                     return_scores=True, jit_compile=True, length_penalty_rule=rule)
        np.testing.assert_array_equal(pad_to(tokens, 6), pad_to(eager, 6))
        np.testing.assert_allclose(to_numpy(scores), to_numpy(eager_scores), atol=1e-4)
    # One compiled loop per rule (the rule is a setting of the loop, the alpha an input).
    assert sum(("length_penalty_rule", rule) in key[-1] for key in compiled_decoders._CACHE[model]) == 1


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
    with pytest.raises(ValueError, match="length_penalty_rule"):
        beam_search(model, src, 4, START, END, length_penalty_rule="hf")


def reference_transformers_beam_search(model, encoder_inputs, max_length, beam_size, alpha):
    """transformers' `_beam_search` (generation/utils.py, `early_stopping=False`) in float64, re-running the whole
    model on every prefix (no cache): `(tokens [B, max_length] after START, 0 after END, scores [B])`.

    Our id 0 is no token of the source framework's vocabulary (left out of the softmax); START stands for Marian's
    pad token, which `bad_words_ids` bans after the softmax, without renormalizing.
    """
    k, big = beam_size, 1.0e9
    batch = len(encoder_inputs)
    running = np.zeros((batch, k, max_length), "int32")
    running_scores = np.where(np.arange(k) == 0, 0.0, -big) * np.ones((batch, 1))
    finished = np.zeros((batch, k, max_length), "int32")
    finished_scores = np.full((batch, k), -big)
    is_finished = np.zeros((batch, k), bool)
    improvable = np.ones((batch, 1), bool)  # transformers' `is_early_stop_heuristic_unsatisfied`, sticky
    repeated_sources = np.repeat(encoder_inputs, k, axis=0)
    top_ranks = np.arange(2 * k) < k

    def take(values, index):
        return np.take_along_axis(values, index.reshape(index.shape + (1,) * (values.ndim - 2)), axis=1)

    for step in range(max_length):
        prefix = np.concatenate([np.full((batch * k, 1), START, "int32"),
                                 running.reshape(batch * k, max_length)[:, :step]], axis=1)
        logits = full_forward_logits(model, repeated_sources, prefix)
        vocab = logits.shape[-1]
        logits[:, 0] = -np.inf
        shifted = logits - logits.max(-1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
        log_probs[:, START] = -np.inf
        totals = (log_probs.reshape(batch, k, vocab) + running_scores[:, :, None]).reshape(batch, k * vocab)
        order = np.argsort(-totals, axis=1, kind="stable")[:, :2 * k]
        top_logp = np.take_along_axis(totals, order, axis=1)
        tokens = order % vocab
        candidates = take(running, order // vocab).copy()
        candidates[:, :, step] = tokens
        hits = (tokens == END) | (step + 1 >= max_length)  # EosTokenCriteria, MaxLengthCriteria
        # The k best candidates that did not end stay alive.
        alive = top_logp - big * hits
        keep = np.argsort(-alive, axis=1, kind="stable")[:, :k]
        running, running_scores = take(candidates, keep), take(alive, keep)
        # Those of the k best that ended join the finished ones, scored sum / length ** alpha (END counted),
        # unless the row has stopped.
        ended = hits & top_ranks
        scores = top_logp / (step + 1) ** alpha - big * ~improvable - big * ~ended
        merged = np.concatenate([finished_scores, scores], axis=1)
        keep = np.argsort(-merged, axis=1, kind="stable")[:, :k]
        finished = take(np.concatenate([finished, candidates], axis=1), keep)
        finished_scores = take(merged, keep)
        is_finished = take(np.concatenate([is_finished, ended], axis=1), keep)
        # A row stops once k have finished and the best alive beam, at its present length, beats none of them.
        best_running = running_scores[:, :1] / (step + 1) ** alpha
        worst_finished = np.where(is_finished, finished_scores.min(axis=1, keepdims=True), -big)
        improvable &= (best_running > worst_finished).any(axis=1, keepdims=True)
        if not improvable.any() or hits.all():
            break
    return finished[:, 0], finished_scores[:, 0]


@functools.lru_cache(maxsize=None)
def often_ending_model(end_bias=1.5, seed=5):
    """A random-weight model whose END logit is raised, so that some rows end at once and others run to the end.

    The random weights are drawn again with NumPy, so that every backend has the same model (biases and norm
    scales keep their constant initial values).
    """
    model = build_transformer(12, 12, **TINY)
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(0.0, 0.2, w.shape).astype(w.dtype) if w.std() > 0 else w
                       for w in model.get_weights()])
    layer = TransformerParts.from_model(model).output_projection
    bias = to_numpy(layer.bias).copy()
    bias[END] += end_bias
    layer.bias.assign(bias)
    return model


# The rule's settings: every combination on TensorFlow. The rule is the same keras.ops code on every backend, so JAX
# and PyTorch (where each setting compiles or runs the loop eagerly, 20+ s apiece) take a covering subset: every beam
# size on both models, every penalty at least once on each.
RULE_GRID = [(case, beam_size, alpha) for case in ("random", "reversal") for beam_size in (1, 2, 4)
             for alpha in (0.0, 0.6, 1.0, 2.0)]
if keras.backend.backend() != "tensorflow":
    RULE_GRID = [("random", 1, 0.0), ("random", 2, 1.0), ("random", 4, 0.6), ("random", 4, 2.0),
                 ("reversal", 1, 2.0), ("reversal", 2, 0.6), ("reversal", 4, 1.0), ("reversal", 4, 0.0)]


@pytest.mark.parametrize("case, beam_size, alpha", RULE_GRID)
def test_transformers_rule_matches_transformers_beam_search(case, beam_size, alpha):
    # A random model (its hypotheses end after 1 to 5 tokens, some rows reach max_length without END in every
    # setting but beam 4 with alpha 0) and the reversal model (rows end at several lengths, most stopped by the rule
    # before max_length; a 5-digit source runs into it).
    model, src = (often_ending_model(), sources(vocab=12, batch=6)) if case == "random" else \
        (trained_reversal_model(), digit_sources(batch=6, seed=3))
    max_length = 5
    want_tokens, want_scores = reference_transformers_beam_search(model, src, max_length, beam_size, alpha)
    tokens, scores = beam_search(model, src, max_length, START, END, beam_size=beam_size, length_penalty=alpha,
                                 return_scores=True, length_penalty_rule="transformers")
    np.testing.assert_array_equal(pad_to(tokens, max_length), want_tokens)
    np.testing.assert_allclose(to_numpy(scores), want_scores, rtol=1e-5, atol=1e-5)
