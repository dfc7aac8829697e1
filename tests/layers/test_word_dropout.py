import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer.layers import WordDropout
from tests.layer_testing import run_layer_test


def _out(layer, shape, dtype="float32"):
    return np.asarray(ops.convert_to_numpy(layer(np.ones(shape, dtype), training=True))).astype("float64")


def test_layer_contract(tmp_path):
    run_layer_test(
        WordDropout,
        {"rate": 0.2, "seed": 3},
        [np.random.rand(2, 5, 8).astype("float32")],
        (2, 5, 8),
        run_training=False,  # no weights to train
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize("rate", [0.1, 0.3])
def test_drops_whole_tokens_at_the_requested_rate_and_rescales_the_rest(rate):
    out = _out(WordDropout(rate, seed=0), (64, 40, 16))
    kept = out != 0
    # One decision per token: all its features are dropped together or kept together.
    assert (kept.all(axis=-1) | ~kept.any(axis=-1)).all()
    dropped = 1 - kept[..., 0].mean()
    n = kept[..., 0].size
    assert abs(dropped - rate) < 5 * np.sqrt(rate * (1 - rate) / n), dropped
    np.testing.assert_allclose(out[kept], 1 / (1 - rate), rtol=1e-6)
    # Decisions differ between sentences and positions (not one mask broadcast over the batch or the length).
    assert (kept[..., 0] != kept[:1, :, 0]).any() and (kept[..., 0] != kept[:, :1, 0]).any()


def test_is_the_identity_outside_training_and_at_rate_zero():
    x = np.random.rand(3, 7, 4).astype("float32")
    np.testing.assert_array_equal(ops.convert_to_numpy(WordDropout(0.5)(x)), x)
    np.testing.assert_array_equal(ops.convert_to_numpy(WordDropout(0.5)(x, training=False)), x)
    np.testing.assert_array_equal(ops.convert_to_numpy(WordDropout(0.0)(x, training=True)), x)


def test_each_call_draws_a_new_mask_and_a_seed_reproduces_them():
    layer = WordDropout(0.5, seed=2)
    first, second = _out(layer, (8, 32, 2)), _out(layer, (8, 32, 2))
    assert (first != second).any()
    np.testing.assert_array_equal(_out(WordDropout(0.5, seed=2), (8, 32, 2)), first)


def test_passes_the_padding_mask_through():
    embedding = keras.layers.Embedding(10, 4, mask_zero=True)
    ids = np.array([[3, 4, 0, 0]])
    x = embedding(ids)
    layer = WordDropout(0.5, seed=0)
    np.testing.assert_array_equal(
        ops.convert_to_numpy(layer.compute_mask(x, embedding.compute_mask(ids))), [[True, True, False, False]]
    )


def test_rejects_a_rate_outside_zero_to_one():
    for rate in (1.0, -0.1):
        with pytest.raises(ValueError, match=r"WordDropout `rate` must be in \[0, 1\)"):
            WordDropout(rate)


@pytest.mark.tensorflow_only
def test_drops_whole_tokens_under_xla_with_an_unknown_batch_and_length():
    import tensorflow as tf

    layer = WordDropout(0.5, seed=4)
    step = tf.function(lambda x: layer(x, training=True), jit_compile=True,
                       input_signature=[tf.TensorSpec((None, None, 8), tf.float32)])
    out = step(tf.ones((16, 12, 8))).numpy()
    kept = out != 0
    assert (kept.all(axis=-1) | ~kept.any(axis=-1)).all() and 0 < kept.mean() < 1
