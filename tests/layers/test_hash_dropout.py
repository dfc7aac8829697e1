import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from keras_transformer.layers import HashDropout
from tests.layer_testing import run_layer_test


def _mask(layer, shape, dtype="float32"):
    """1 where `layer` kept an element of an all-ones input in training mode, 0 where it dropped it."""
    out = np.asarray(ops.convert_to_numpy(layer(np.ones(shape, dtype), training=True))).astype("float64")
    return (out != 0).astype("float64"), out


def test_layer_contract(tmp_path):
    run_layer_test(
        HashDropout,
        {"rate": 0.2, "seed": 3},
        [np.random.rand(2, 5, 8).astype("float32")],
        (2, 5, 8),
        run_training=False,  # no weights to train; the gradient test below covers training
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize("rate", [0.1, 0.3, 0.5])
def test_drops_the_requested_fraction_and_rescales_the_rest(rate):
    mask, out = _mask(HashDropout(rate, seed=0), (64, 24, 256))
    n = mask.size
    dropped = 1 - mask.mean()
    assert abs(dropped - rate) < 5 * np.sqrt(rate * (1 - rate) / n), dropped
    np.testing.assert_allclose(out[mask == 1], 1 / (1 - rate), rtol=1e-6)


def test_is_the_identity_outside_training_and_at_rate_zero():
    x = np.random.rand(3, 7).astype("float32")
    np.testing.assert_array_equal(ops.convert_to_numpy(HashDropout(0.5)(x)), x)
    np.testing.assert_array_equal(ops.convert_to_numpy(HashDropout(0.5)(x, training=False)), x)
    np.testing.assert_array_equal(ops.convert_to_numpy(HashDropout(0.0)(x, training=True)), x)


def test_neighbouring_elements_are_uncorrelated():
    """No structure along any axis: a mask and its shift by one position (along each axis, and
    across the flattened tensor) agree only as often as independent coin flips do."""
    mask, _ = _mask(HashDropout(0.5, seed=1), (64, 48, 256))
    centered = mask - mask.mean()
    bound = 5 / np.sqrt(mask.size)
    for axis in range(3):
        shifted = np.roll(centered, 1, axis=axis)
        corr = (centered * shifted).mean() / centered.var()
        assert abs(corr) < bound, (axis, corr)
    flat = centered.ravel()
    for lag in (1, 2, 3, 7, 256, 4096):
        corr = (flat[:-lag] * flat[lag:]).mean() / flat.var()
        assert abs(corr) < bound, (lag, corr)


def test_each_call_draws_a_new_independent_mask():
    layer = HashDropout(0.5, seed=2)
    masks = np.stack([_mask(layer, (4096,))[0] for _ in range(200)])
    # Consecutive calls agree like independent coin flips (half the time), never identically.
    agreement = (masks[1:] == masks[:-1]).mean()
    assert abs(agreement - 0.5) < 5 * np.sqrt(0.25 / masks[1:].size), agreement
    # No position is favoured across calls: each one's drop frequency over 200 calls stays binomial.
    per_position = 1 - masks.mean(axis=0)
    assert np.abs(per_position - 0.5).max() < 6 * np.sqrt(0.25 / 200)


def test_seed_makes_masks_reproducible():
    first = _mask(HashDropout(0.3, seed=7), (32, 32))[0]
    again = _mask(HashDropout(0.3, seed=7), (32, 32))[0]
    other = _mask(HashDropout(0.3, seed=8), (32, 32))[0]
    np.testing.assert_array_equal(first, again)
    assert (first != other).any()


@pytest.mark.every_case  # the cases vary what the backend computes (dtypes, compilation)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_training_in_half_precision_keeps_the_dtype(dtype):
    layer = HashDropout(0.25, seed=0, dtype=f"mixed_{dtype}")
    out = layer(ops.ones((16, 64), dtype=dtype), training=True)
    assert keras.backend.standardize_dtype(out.dtype) == dtype
    values = np.unique(ops.convert_to_numpy(ops.cast(out, "float32")))
    np.testing.assert_allclose(values, [0.0, 1 / 0.75], rtol=1e-2)


@pytest.mark.tensorflow_only
def test_gradient_flows_only_through_kept_elements_and_under_xla():
    layer = HashDropout(0.4, seed=5)
    x = tf.ones((8, 32))

    @tf.function(jit_compile=True)
    def forward_and_gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, training=True)
        return y, tape.gradient(y, x)

    y, grad = forward_and_gradient(x)
    y, grad = y.numpy(), grad.numpy()
    np.testing.assert_allclose(grad, y)  # d(x * mask / (1 - rate))/dx = mask / (1 - rate) = y for x = 1
    assert 0 < (y == 0).mean() < 1


def test_rejects_a_rate_outside_zero_to_one():
    with pytest.raises(ValueError, match=r"rate.*\[0, 1\)"):
        HashDropout(1.0)
    with pytest.raises(ValueError, match=r"rate.*\[0, 1\)"):
        HashDropout(-0.1)


@pytest.mark.tensorflow_only
def test_a_tensor_too_large_for_int32_indices_is_a_clear_error():
    layer = HashDropout(0.1)

    def trace(shape):  # traced with a static shape, nothing allocated
        return tf.function(lambda x: layer(x, training=True)).get_concrete_function(tf.TensorSpec(shape))

    with pytest.raises(ValueError, match=r"fewer than 2\^31 elements.*2,147,483,648 elements"):
        trace((2**16, 2**15))
    assert trace((2**16, 2**15 - 1)).structured_outputs.shape == (2**16, 2**15 - 1)
    assert trace((None, 2**15)).structured_outputs.shape.as_list() == [None, 2**15]  # unknown size: not checked
