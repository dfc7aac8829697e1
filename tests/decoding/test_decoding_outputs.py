"""Forced target prefixes (greedy and beam search) and n-best beam search, at the level of the decoders: on every
backend, against a full-forward reference."""

import numpy as np
import pytest

from keras_transformer.decoding.beam_search import _beam_search_alpha_input
from keras_transformer.decoding.greedy import greedy_search
from keras_transformer.models.transformer_parts import TransformerParts
from tests.decoding.helpers import END
from tests.decoding.helpers import START
from tests.decoding.helpers import eager_beam_search as beam_search
from tests.decoding.helpers import penalized
from tests.decoding.helpers import sequence_log_prob
from tests.decoding.helpers import sources
from tests.decoding.helpers import tiny_model
from tests.decoding.helpers import to_numpy

MAX = 8


def _beam(model, src, beam_size, alpha=0.6, prefix=None, num_hypotheses=1):
    parts = TransformerParts.from_model(model)
    alphas = np.full((src.shape[0],), alpha, "float32")
    return _beam_search_alpha_input(parts, src, alphas, MAX, START, END, beam_size, True, prefix=prefix,
                                    num_hypotheses=num_hypotheses)


def _prefixes(batch, vocab=40, seed=3):
    """Row i forces i % 3 tokens (0-padded); never the end token."""
    rng = np.random.default_rng(seed)
    prefix = rng.integers(3, vocab, (batch, 3)).astype("int32")
    for row in range(batch):
        prefix[row, row % 3:] = 0
    return prefix


def test_greedy_takes_the_prefix_then_chooses_as_the_reference():
    model = tiny_model()
    src, prefix = sources(), _prefixes(4)
    tokens = to_numpy(greedy_search(TransformerParts.from_model(model), src, MAX, START, END, prefix=prefix))
    for row in range(src.shape[0]):
        forced = [int(t) for t in prefix[row] if t]
        assert tokens[row, : len(forced)].tolist() == forced
        # After the prefix, each token is the argmax of a full forward pass over everything before it.
        out = [int(t) for t in tokens[row] if t]
        for position in range(len(forced), len(out)):
            decoder_inputs = np.array([[START] + out[:position]], "int32")
            logits = to_numpy(model({"encoder_inputs": src[row: row + 1], "decoder_inputs": decoder_inputs}))
            logits = logits[0, -1].astype("float64")
            logits[[0, START]] = -np.inf
            assert out[position] == int(np.argmax(logits))


def test_forcing_greedy_own_tokens_changes_nothing():
    model = tiny_model(seed=1)
    src = sources(seed=1)
    parts = TransformerParts.from_model(model)
    free = to_numpy(greedy_search(parts, src, MAX, START, END))
    forced = to_numpy(greedy_search(parts, src, MAX, START, END, prefix=free[:, :2]))
    np.testing.assert_array_equal(forced, free)


def test_beam_search_keeps_the_prefix_and_scores_the_whole_hypothesis():
    model = tiny_model()
    src, prefix = sources(), _prefixes(4)
    tokens, scores = (to_numpy(x) for x in _beam(model, src, 3, prefix=prefix))
    for row in range(src.shape[0]):
        forced = [int(t) for t in prefix[row] if t]
        assert tokens[row, : len(forced)].tolist() == forced
        # The score is the full hypothesis' log-probability, forced tokens included, over the length penalty.
        log_prob, length = sequence_log_prob(model, src[row], tokens[row])
        assert scores[row] == pytest.approx(penalized(log_prob, length, 0.6), abs=1e-4)


def test_n_best_is_sorted_distinct_and_led_by_the_best():
    model = tiny_model(seed=2)
    src = sources(seed=2)
    best = to_numpy(beam_search(model, src, MAX, START, END, beam_size=4, length_penalty=0.6))
    tokens, scores = (to_numpy(x) for x in _beam(model, src, 4, num_hypotheses=3))
    assert tokens.shape == (4, 3, MAX) and scores.shape == (4, 3)
    for row in range(src.shape[0]):
        first = tokens[row, 0, : best.shape[1]]
        np.testing.assert_array_equal(first, best[row])
        assert list(scores[row]) == sorted(scores[row], reverse=True)
        hypotheses = {tuple(t) for t in tokens[row]}
        assert len(hypotheses) == 3
        for h in range(3):  # each score is its own hypothesis' penalized log-probability
            log_prob, length = sequence_log_prob(model, src[row], tokens[row, h])
            assert scores[row, h] == pytest.approx(penalized(log_prob, length, 0.6), abs=1e-4)
