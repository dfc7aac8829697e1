import gc

import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer.decoding.sampling import sampling_choice
from tests.decoding.helpers import END
from tests.decoding.helpers import START
from tests.decoding.helpers import check_padding_after_end
from tests.decoding.helpers import digit_sources
from tests.decoding.helpers import eager_greedy_decode as greedy_decode
from tests.decoding.helpers import eager_sample_decode as sample_decode
from tests.decoding.helpers import pad_to
from tests.decoding.helpers import sources
from tests.decoding.helpers import tiny_model
from tests.decoding.helpers import to_numpy
from tests.decoding.helpers import trained_reversal_model


def _draw_frequencies(logits, **filters):
    """Frequencies of the tokens the sampler picks over an even grid of uniform numbers."""
    count = 20000
    uniforms = ((np.arange(count) + 0.5) / count).astype("float32")[:, None]
    logits = np.tile(np.asarray(logits, "float32")[None], (count, 1))
    choose = sampling_choice(logits.shape[1], ops.convert_to_tensor(uniforms), **filters)
    picked = to_numpy(choose(ops.convert_to_tensor(logits), ops.convert_to_tensor(0)))
    return np.bincount(picked, minlength=logits.shape[1]) / count


def _softmax(x):
    e = np.exp(x - np.max(x))
    return e / e.sum()


def test_sampler_follows_the_filtered_distribution():
    logits = np.log(np.array([0.05, 0.4, 0.3, 0.15, 0.1]))
    np.testing.assert_allclose(_draw_frequencies(logits), np.exp(logits), atol=2e-3)
    np.testing.assert_allclose(
        _draw_frequencies(logits, temperature=2.0), _softmax(logits / 2.0), atol=2e-3
    )
    top2 = np.array([0, 0.4, 0.3, 0, 0]) / 0.7
    np.testing.assert_allclose(_draw_frequencies(logits, top_k=2), top2, atol=2e-3)
    # Nucleus 0.75: 0.4 + 0.3 < 0.75, so the 0.15 token is needed too.
    nucleus = np.array([0, 0.4, 0.3, 0.15, 0]) / 0.85
    np.testing.assert_allclose(_draw_frequencies(logits, top_p=0.75), nucleus, atol=2e-3)
    np.testing.assert_allclose(_draw_frequencies(logits, top_k=2, top_p=0.75), top2, atol=2e-3)


def test_seeded_sampling_is_reproducible():
    model = tiny_model()
    src = sources()
    first = to_numpy(sample_decode(model, src, 8, START, END, temperature=1.5, seed=7))
    again = to_numpy(sample_decode(model, src, 8, START, END, temperature=1.5, seed=7))
    other = to_numpy(sample_decode(model, src, 8, START, END, temperature=1.5, seed=8))
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(pad_to(first, 8), pad_to(other, 8))


def test_top_k_one_and_a_tiny_nucleus_are_greedy():
    model = tiny_model()
    src = sources()
    greedy = pad_to(greedy_decode(model, src, 8, START, END), 8)
    np.testing.assert_array_equal(pad_to(sample_decode(model, src, 8, START, END, top_k=1, seed=1), 8), greedy)
    np.testing.assert_array_equal(pad_to(sample_decode(model, src, 8, START, END, top_p=1e-6, seed=2), 8), greedy)


def test_rows_end_with_padding_and_traced_functions_match_eager():
    model = trained_reversal_model()
    src = digit_sources()
    eager = to_numpy(sample_decode(model, src, 8, START, END, top_k=3, seed=5))
    check_padding_after_end(eager, 8)
    assert eager.shape[1] < 8  # the trained model ends every row: the output is trimmed
    eager = pad_to(eager, 8)

    def decode(ids):
        return sample_decode(model, ids, 8, START, END, top_k=3, seed=5)

    if keras.backend.backend() == "tensorflow":  # a graph draws the same numbers as eager execution
        import tensorflow as tf

        traced = tf.function(decode, input_signature=[tf.TensorSpec([None, None], tf.int32)])
        np.testing.assert_array_equal(to_numpy(traced(tf.constant(src))), eager)
    if keras.backend.backend() == "torch":
        return  # PyTorch decodes eagerly by default (torch.compile unrolls the loop); one compiled check elsewhere
    compiled = pad_to(sample_decode(model, src, 8, START, END, top_k=3, seed=5, jit_compile=True), 8)
    np.testing.assert_array_equal(compiled, eager)  # XLA, the random numbers drawn outside
    gc.collect()  # the cached compiled function keeps what it needs alive
    other_seed = pad_to(sample_decode(model, src, 8, START, END, top_k=3, seed=6, jit_compile=True), 8)
    np.testing.assert_array_equal(other_seed, pad_to(sample_decode(model, src, 8, START, END, top_k=3, seed=6), 8))


def test_arguments_are_checked():
    model = tiny_model()
    src = sources()
    with pytest.raises(ValueError, match="temperature"):
        sample_decode(model, src, 4, START, END, temperature=0.0)
    with pytest.raises(ValueError, match="top_p"):
        sample_decode(model, src, 4, START, END, top_p=1.5)
    with pytest.raises(ValueError, match="top_k"):
        sample_decode(model, src, 4, START, END, top_k=0)
    with pytest.raises(TypeError, match="seed"):
        sample_decode(model, src, 4, START, END, seed="one")
