"""BeamSlotEngine (beam search with continuous batching) against the whole-loop `beam_search`."""

import numpy as np
import pytest
from keras import ops

from keras_transformer.decoding import BeamSampler
from keras_transformer.decoding import BeamSlotEngine
from keras_transformer.decoding import GreedySampler
from keras_transformer.decoding import beam_search
from keras_transformer.decoding import beam_search_with_parts
from keras_transformer.models import TransformerParts
from tests.decoding.helpers import START
from tests.decoding.helpers import slot_setting
from tests.decoding.helpers import to_numpy
from tests.decoding.helpers import trimmed

MAX_LENGTH = 12


@pytest.fixture(scope="module")
def setting():
    return slot_setting()


@pytest.mark.parametrize("rule, alpha", [("gnmt", 0.6), ("transformers", 1.0)])
def test_groups_arriving_mid_run_equal_the_whole_loop(setting, rule, alpha):
    model, src, end_id = setting
    expected = to_numpy(beam_search(model, src, MAX_LENGTH, START, end_id, beam_size=3, length_penalty=alpha,
                                    length_penalty_rule=rule))
    lengths = [len(trimmed(row)) for row in expected]
    assert min(lengths) < 4 and max(lengths) == MAX_LENGTH  # sentences end early, late and never
    engine = BeamSlotEngine(model, MAX_LENGTH, START, end_id, slots=4, sampler=BeamSampler(3, alpha, rule),
                            source_buckets=(8, 16), steps_per_call=2)
    arrivals = np.random.default_rng(1).integers(0, 40, len(src))
    for i, tokens in enumerate(engine.run(src, arrivals=arrivals)):
        np.testing.assert_array_equal(tokens, trimmed(expected[i]), err_msg=f"row {i}")
    assert engine.idle


def test_prefixes_n_best_and_a_forced_end_equal_the_whole_loop(setting):
    model, src, end_id = setting
    src = src[:8]
    prefix = np.zeros((8, 3), "int32")
    prefixes = []
    for row in range(8):
        forced = np.array([t for t in range(5, 9) if t != end_id][: row % 3 + 1], "int32")
        prefix[row, : forced.size] = forced
        prefixes.append(forced)
    tokens, scores = beam_search_with_parts(
        TransformerParts.from_model(model), ops.convert_to_tensor(src), MAX_LENGTH, START, end_id, beam_size=3,
        prefix=ops.convert_to_tensor(prefix), num_hypotheses=2, force_end=True)
    tokens, scores = to_numpy(tokens), to_numpy(scores)
    engine = BeamSlotEngine(model, MAX_LENGTH, START, end_id, slots=3, sampler=BeamSampler(3, force_end=True),
                            source_buckets=(16,), num_hypotheses=2)
    requests = []
    for row in range(8):  # one arrives before each step: each joins the groups already running
        requests.append(engine.submit(src[row], prefix=prefixes[row]))
        engine.step()
    while not engine.idle:
        engine.step()
    for row, request in enumerate(requests):
        assert request.done and len(request.hypotheses) == 2
        for n, (hypothesis, score) in enumerate(request.hypotheses):
            np.testing.assert_array_equal(hypothesis, trimmed(tokens[row, n]), err_msg=f"row {row}, hypothesis {n}")
            np.testing.assert_allclose(score, scores[row, n], atol=1e-5)
        np.testing.assert_array_equal(request.tokens[: prefixes[row].size], prefixes[row])


def test_a_first_token_costs_nothing_as_in_the_whole_loop(setting, rule="transformers", alpha=1.0):
    """A multilingual model's target language: the first token forced at no cost (scores as the whole loop's
    `first_token`, not a prefix's), a different one per row, rows arriving mid-run."""
    model, src, end_id = setting
    src = src[:8]
    first = np.array([5, 6, 7, 5, 6, 7, 8, 8], "int32")
    tokens, scores = beam_search_with_parts(
        TransformerParts.from_model(model), ops.convert_to_tensor(src), MAX_LENGTH, START, end_id, beam_size=3,
        length_penalty=alpha, length_penalty_rule=rule, first_token=ops.convert_to_tensor(first), num_hypotheses=2)
    tokens, scores = to_numpy(tokens), to_numpy(scores)
    _, prefix_scores = beam_search_with_parts(
        TransformerParts.from_model(model), ops.convert_to_tensor(src), MAX_LENGTH, START, end_id, beam_size=3,
        length_penalty=alpha, length_penalty_rule=rule, prefix=ops.convert_to_tensor(first[:, None]),
        num_hypotheses=2)
    assert np.abs(to_numpy(prefix_scores)[:, 0] - scores[:, 0]).max() > 1e-3  # a prefix would score otherwise
    engine = BeamSlotEngine(model, MAX_LENGTH, START, end_id, slots=3, sampler=BeamSampler(3, alpha, rule),
                            source_buckets=(16,), num_hypotheses=2)
    requests = []
    for row in range(8):
        requests.append(engine.submit(src[row], first_token=first[row]))
        engine.step()
    while not engine.idle:
        engine.step()
    for row, request in enumerate(requests):
        for n, (hypothesis, score) in enumerate(request.hypotheses):
            np.testing.assert_array_equal(hypothesis, trimmed(tokens[row, n]), err_msg=f"row {row}, hypothesis {n}")
            np.testing.assert_allclose(score, scores[row, n], atol=1e-5)
        assert request.tokens[0] == first[row]


def test_warm_up_compiles_everything_and_a_cancelled_sentence_frees_its_group(setting):
    model, src, end_id = setting
    engine = BeamSlotEngine(model, MAX_LENGTH, START, end_id, slots=2, sampler=BeamSampler(2), source_buckets=(16,))
    assert engine.warm_up() == 3  # the insert of 1; the step on 1 or 2 slots
    shapes = set(engine.compiled_shapes)
    expected = to_numpy(beam_search(model, src[:3], MAX_LENGTH, START, end_id, beam_size=2))
    first, second, third = (engine.submit(row) for row in src[:3])
    engine.step()
    engine.cancel(first)
    finished = []
    while not engine.idle:
        finished += engine.step()
    assert first not in finished and {second, third} <= set(finished)
    np.testing.assert_array_equal(third.tokens, trimmed(expected[2]))
    assert engine.compiled_shapes == shapes  # nothing compiled after the warm-up


def test_bad_settings_are_refused_in_one_line(setting):
    model, _, end_id = setting
    with pytest.raises(ValueError, match="BeamSampler"):
        BeamSlotEngine(model, MAX_LENGTH, START, end_id, sampler=GreedySampler())
    with pytest.raises(ValueError, match="num_hypotheses=3 exceeds num_beams=2"):
        BeamSlotEngine(model, MAX_LENGTH, START, end_id, sampler=BeamSampler(2), num_hypotheses=3)


def test_groups_that_outgrow_the_caches_move_to_longer_ones(setting):
    model, src, end_id = setting
    src = src[:16, :2]  # sources of 1 or 2 ids; cache lengths 18, 20 and 30
    expected = to_numpy(beam_search(model, src, 30, START, end_id, beam_size=2))
    assert max(len(trimmed(row)) for row in expected) > 20
    engine = BeamSlotEngine(model, 30, START, end_id, slots=3, sampler=BeamSampler(2), steps_per_call=3,
                            source_buckets=(1, 2, 16))
    for i, tokens in enumerate(engine.run(src, arrivals=np.arange(len(src)) % 5)):
        np.testing.assert_array_equal(tokens, trimmed(expected[i]), err_msg=f"row {i}")
    assert 16 in {shape[1] for shape in engine.compiled_shapes}  # the longest caches, for sources of 2 ids
