"""SlotEngine (continuous batching) against the whole-loop decoders, and the per-row decoder step under it."""

import numpy as np
import pytest
from keras import ops

from keras_transformer.decoding import BeamSampler
from keras_transformer.decoding import TopPSampler
from keras_transformer.decoding import greedy_search
from keras_transformer.decoding.sampling import draw_uniforms
from keras_transformer.decoding.slot_engine import SlotEngine
from keras_transformer.layers import MultiHeadAttention
from keras_transformer.layers import PositionalEmbedding
from keras_transformer.models import TransformerParts
from tests.decoding.helpers import START
from tests.decoding.helpers import eager_greedy_decode as greedy_decode
from tests.decoding.helpers import eager_sample_decode as sample_decode
from tests.decoding.helpers import slot_setting
from tests.decoding.helpers import to_numpy
from tests.decoding.helpers import trimmed as _trimmed

MAX_LENGTH = 12


@pytest.fixture(scope="module")
def setting():
    return slot_setting()


def test_greedy_rows_arriving_mid_run_equal_the_whole_loop(setting):
    model, src, end_id = setting
    expected = to_numpy(greedy_decode(model, src, MAX_LENGTH, START, end_id))
    lengths = [len(_trimmed(row)) for row in expected]
    assert min(lengths) < 4 and max(lengths) == MAX_LENGTH  # rows end early, late and never
    engine = SlotEngine(model, MAX_LENGTH, START, end_id, slots=4, source_buckets=(8, 16))
    arrivals = np.random.default_rng(1).integers(0, 40, len(src))
    outputs = engine.run(src, arrivals=arrivals)
    for i, tokens in enumerate(outputs):
        np.testing.assert_array_equal(tokens, _trimmed(expected[i]), err_msg=f"row {i}")
    assert engine.idle and engine.live == 0


def test_several_tokens_per_call_and_a_forced_end_keep_the_tokens(setting):
    model, src, end_id = setting
    expected = to_numpy(greedy_decode(model, src[:12], MAX_LENGTH, START, end_id, force_end=True))
    from keras_transformer.decoding import GreedySampler

    engine = SlotEngine(model, MAX_LENGTH, START, end_id, slots=3, steps_per_call=3,
                        sampler=GreedySampler(force_end=True), source_buckets=(16,))
    for i, tokens in enumerate(engine.run(src[:12], arrivals=range(12))):
        np.testing.assert_array_equal(tokens, _trimmed(expected[i]), err_msg=f"row {i}")
        assert tokens[-1] == end_id


def test_seeded_sampling_equals_sample_decode_with_the_same_random_numbers(setting):
    model, src, end_id = setting
    src = src[:16]
    expected = to_numpy(sample_decode(model, src, MAX_LENGTH, START, end_id, top_p=0.9, seed=7))
    uniforms = to_numpy(draw_uniforms(len(src), MAX_LENGTH, 7))  # the numbers sample_decode drew per row
    engine = SlotEngine(model, MAX_LENGTH, START, end_id, slots=5, sampler=TopPSampler(p=0.9),
                        source_buckets=(8, 16))
    outputs = engine.run(src, uniforms=uniforms, arrivals=np.arange(len(src)) % 7)
    for i, tokens in enumerate(outputs):
        np.testing.assert_array_equal(tokens, _trimmed(expected[i]), err_msg=f"row {i}")


def test_forced_prefixes_equal_the_whole_loop_prefix(setting):
    model, src, end_id = setting
    src = src[:8]
    prefix = np.zeros((8, 3), "int32")
    prefixes = []
    for row in range(8):
        forced = np.array([t for t in range(5, 9) if t != end_id][: row % 3 + 1], "int32")
        prefix[row, : forced.size] = forced
        prefixes.append(forced)
    parts = TransformerParts.from_model(model)
    expected = to_numpy(greedy_search(parts, src, MAX_LENGTH, START, end_id, prefix=ops.convert_to_tensor(prefix)))
    engine = SlotEngine(model, MAX_LENGTH, START, end_id, slots=3, source_buckets=(16,))
    for i, tokens in enumerate(engine.run(src, prefixes=prefixes, arrivals=[0, 0, 0, 1, 2, 3, 3, 5])):
        np.testing.assert_array_equal(tokens, _trimmed(expected[i]), err_msg=f"row {i}")
        np.testing.assert_array_equal(tokens[: prefixes[i].size], prefixes[i])
    # A first token (a multilingual model's target language) decodes greedily as a one-token prefix does.
    first = [prefix[0] for prefix in prefixes]
    expected = to_numpy(greedy_search(parts, src, MAX_LENGTH, START, end_id,
                                      prefix=ops.convert_to_tensor(np.array(first, "int32")[:, None])))
    for i, tokens in enumerate(engine.run(src, first_tokens=first, arrivals=[0, 1, 1, 2, 2, 3, 4, 4])):
        np.testing.assert_array_equal(tokens, _trimmed(expected[i]), err_msg=f"first token, row {i}")
    with pytest.raises(ValueError, match="prefix or a first_token"):
        engine.submit(src[0], prefix=prefixes[0], first_token=5)


def test_warm_up_compiles_everything_and_a_cancelled_row_frees_its_slot(setting):
    model, src, end_id = setting
    engine = SlotEngine(model, MAX_LENGTH, START, end_id, slots=2, source_buckets=(8, 16))
    traced = engine.warm_up()
    # Per source bucket: the insert of 1 (slots 2); the step on 1 or 2 rows (with or without an arriving sentence).
    assert traced == 2 * 3
    shapes = set(engine.compiled_shapes)
    expected = to_numpy(greedy_decode(model, src, MAX_LENGTH, START, end_id))
    rows = [i for i, row in enumerate(expected) if len(_trimmed(row)) >= 3][:3]  # none ends in the first step
    first, second, third = (engine.submit(src[i]) for i in rows)
    engine.step()
    assert {first.slot, second.slot} == {0, 1} and third.slot is None
    engine.cancel(first)
    finished = []
    while not engine.idle:
        finished += engine.step()
    assert first not in finished and first.cancelled and {second, third} <= set(finished)
    alone = to_numpy(greedy_decode(model, src[rows[2]:rows[2] + 1], MAX_LENGTH, START, end_id))[0]
    np.testing.assert_array_equal(third.tokens, _trimmed(alone))
    assert engine.compiled_shapes == shapes  # nothing compiled after the warm-up


def test_bad_input_is_refused_in_one_line(setting):
    model, _, end_id = setting
    with pytest.raises(ValueError, match="beam search"):
        SlotEngine(model, MAX_LENGTH, START, end_id, sampler=BeamSampler(num_beams=2))
    engine = SlotEngine(model, MAX_LENGTH, START, end_id, slots=2, source_buckets=(8,))
    with pytest.raises(ValueError, match="at most 8"):
        engine.submit(np.arange(3, 12))
    with pytest.raises(ValueError, match="at least one source id"):
        engine.submit(np.zeros(4, "int32"))
    with pytest.raises(ValueError, match="sampling engine"):
        engine.submit([5, 6], seed=3)


@pytest.mark.parametrize("use_rotary", [False, True])
def test_a_position_per_row_equals_each_row_at_its_own_position(use_rotary):
    """Self-attention with a cache: rows written and read at different positions in one call give what each row
    gives at its own scalar position; the positions beyond a row's own stay unread (causal per row)."""
    rng = np.random.default_rng(0)
    batch, heads, dim, length = 3, 2, 4, 6
    layer = MultiHeadAttention(heads, dim, use_rotary=use_rotary)
    query = rng.normal(size=(batch, 1, heads * dim)).astype("float32")
    layer(query, query)
    keys = rng.normal(size=(batch, heads, length, dim)).astype("float32")
    values = rng.normal(size=(batch, heads, length, dim)).astype("float32")
    positions = np.array([0, 3, 5], "int32")
    out, (new_keys, _) = layer(query, query, cache=(keys, values), cache_index=ops.convert_to_tensor(positions))
    for row, position in enumerate(positions):
        alone, (alone_keys, _) = layer(query[row:row + 1], query[row:row + 1],
                                       cache=(keys[row:row + 1], values[row:row + 1]), cache_index=int(position))
        np.testing.assert_allclose(to_numpy(out)[row], to_numpy(alone)[0], atol=1e-5)
        np.testing.assert_allclose(to_numpy(new_keys)[row], to_numpy(alone_keys)[0], atol=1e-6)
    # Later cache entries of row 0 are masked: changing them changes nothing.
    keys2 = keys.copy()
    keys2[0, :, 1:] += 10.0
    out2, _ = layer(query, query, cache=(keys2, values), cache_index=ops.convert_to_tensor(positions))
    np.testing.assert_allclose(to_numpy(out2)[0], to_numpy(out)[0], atol=1e-6)


@pytest.mark.parametrize("position", ["sinusoidal", "sinusoidal_concat", "learned"])
def test_positional_embedding_takes_a_start_position_per_row(position):
    layer = PositionalEmbedding(30, 8, max_length=16, position=position)
    ids = np.array([[4], [7], [9]], "int32")
    starts = np.array([0, 5, 11], "int32")
    together = to_numpy(layer(ids, start_index=ops.convert_to_tensor(starts)))
    for row, start in enumerate(starts):
        np.testing.assert_allclose(together[row], to_numpy(layer(ids[row:row + 1], start_index=int(start)))[0],
                                   atol=1e-6)


def test_rows_that_outgrow_the_caches_move_to_longer_ones(setting):
    """Short sources get short caches (`cache_length`); a sentence whose output outgrows them moves every live row
    to a larger bucket, and the tokens stay the whole loop's."""
    model, src, end_id = setting
    src = src[:, :2]  # sources of 1 or 2 ids
    expected = to_numpy(greedy_decode(model, src, 30, START, end_id))
    engine = SlotEngine(model, 30, START, end_id, slots=4, steps_per_call=3, source_buckets=(1, 2, 16))
    assert [engine.cache_length(b) for b in engine.source_buckets] == [18, 20, 30]
    assert max(len(_trimmed(row)) for row in expected) > 20  # some outputs need the longest caches
    for i, tokens in enumerate(engine.run(src, arrivals=np.arange(len(src)) % 9)):
        np.testing.assert_array_equal(tokens, _trimmed(expected[i]), err_msg=f"row {i}")
    assert 16 in {shape[1] for shape in engine.compiled_shapes}  # the longest caches, for sources of 2 ids
