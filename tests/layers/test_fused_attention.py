"""The fused attention path (`keras.ops.dot_product_attention`) against the explicit softmax path on the same
weights: forward outputs, gradients and cached greedy decoding, with masks, in float32, float16 and bfloat16."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer import build_transformer
from keras_transformer.decoding import greedy_decode
from keras_transformer.layers import MultiHeadAttention

# Largest absolute difference allowed between the two paths (outputs of order 1): float rounding of the same
# arithmetic in another order.
TOLERANCE = {"float32": 1e-5, "float16": 4e-3, "bfloat16": 3e-2}


def _np(x):
    return np.asarray(ops.convert_to_numpy(ops.cast(x, "float32")))


def _pair(dtype="float32", **options):
    """Two layers with the same weights: the fused default and the explicit path."""
    fused = MultiHeadAttention(num_heads=4, key_dim=8, dtype=dtype, **options)
    explicit = MultiHeadAttention(num_heads=4, key_dim=8, dtype=dtype, fused_attention=False, **options)
    fused.build((None, None, 16), (None, None, 16))
    explicit.build((None, None, 16), (None, None, 16))
    explicit.set_weights(fused.get_weights())
    return fused, explicit


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(3, 6, 16)).astype("float32")
    value = rng.normal(size=(3, 9, 16)).astype("float32")
    value_mask = np.ones((3, 9), bool)
    value_mask[1, 5:] = False
    value_mask[2, 2:] = False
    query_mask = np.ones((3, 6), bool)
    query_mask[2, 4:] = False
    return query, value, value_mask, query_mask


@pytest.fixture
def count_fused_calls(monkeypatch):
    calls = []
    original = keras.ops.dot_product_attention

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(keras.ops, "dot_product_attention", counting)
    return calls


@pytest.mark.every_case  # the cases vary what the backend computes (dtypes, compilation)
@pytest.mark.parametrize("dtype", sorted(TOLERANCE))
@pytest.mark.parametrize("case", ["self-causal", "cross-padded", "self-padded-query", "rotary-causal"])
def test_fused_outputs_equal_the_explicit_path(dtype, case, count_fused_calls):
    query, value, value_mask, query_mask = _inputs()
    fused, explicit = _pair(dtype, use_rotary=case.startswith("rotary"))
    if case in ("self-causal", "rotary-causal"):
        args, kwargs = (query, query), {"use_causal_mask": True}
    elif case == "cross-padded":
        args, kwargs = (query, value), {"value_mask": value_mask}
    else:
        args, kwargs = (query, query), {"query_mask": query_mask, "value_mask": query_mask, "use_causal_mask": True}
    got, want = _np(fused(*args, **kwargs)), _np(explicit(*args, **kwargs))
    assert len(count_fused_calls) == 1  # the fused layer took the fused kernel, the explicit one did not
    assert np.isfinite(got).all()  # a padded row must not turn into NaN: its gradient would poison the update
    if "query_mask" in kwargs:
        # A padded query position attends to nothing: its output is undefined on both paths (the kernels fill
        # fully masked rows differently) and the Keras mask zeroes it downstream. Real positions must agree.
        got, want = got[query_mask], want[query_mask]
    assert np.abs(got - want).max() <= TOLERANCE[dtype], np.abs(got - want).max()


def test_calls_the_fused_path_cannot_serve_use_the_explicit_one(count_fused_calls):
    query, value, value_mask, _ = _inputs()
    layer = MultiHeadAttention(num_heads=4, key_dim=8, dropout=0.2)
    layer(query, value, value_mask=value_mask)  # inference: dropout is off, fused
    assert len(count_fused_calls) == 1
    layer(query, value, return_attention_scores=True)  # weights asked for
    layer(query, value, training=True)  # attention dropout
    cache = layer.compute_cache(value)
    layer(query, cache=cache, value_mask=value_mask)  # cross-attention cache (heads first)
    assert len(count_fused_calls) == 1


def _model(fused):
    keras.utils.set_random_seed(3)
    inputs = keras.Input((None, 16))
    x = MultiHeadAttention(num_heads=4, key_dim=8, fused_attention=fused)(inputs, inputs, use_causal_mask=True)
    model = keras.Model(inputs, keras.layers.Dense(5)(x))
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
    return model


def test_fused_gradients_equal_the_explicit_path():
    fused, explicit = _model(True), _model(False)
    explicit.set_weights(fused.get_weights())
    query, _, _, _ = _inputs(seed=1)
    target = np.random.default_rng(2).normal(size=(3, 6, 5)).astype("float32")
    before = [np.array(w) for w in fused.get_weights()]
    fused.train_on_batch(query, target)
    explicit.train_on_batch(query, target)
    for start, a, b in zip(before, fused.get_weights(), explicit.get_weights()):
        # One SGD step: the update is lr * gradient, so equal updates mean equal gradients.
        np.testing.assert_allclose(np.array(a) - start, np.array(b) - start, atol=1e-5)
    assert any(np.abs(np.array(a) - start).max() > 1e-4 for start, a in zip(before, fused.get_weights()))


@pytest.mark.every_case  # the cases vary what the backend computes (dtypes, compilation)
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_cached_greedy_decoding_gives_the_explicit_paths_tokens(policy):
    keras.utils.set_random_seed(5)
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        model = build_transformer(40, 40, num_layers=2, d_model=32, num_heads=4, d_ff=64, dropout=0.0, max_length=32)
    finally:
        keras.config.set_dtype_policy(previous)
    sources = np.random.default_rng(4).integers(3, 40, (4, 7)).astype("int32")
    sources[1, 4:] = 0
    sources[3, 2:] = 0
    fused_tokens = _np(greedy_decode(model, sources, 12, 1, 2, jit_compile=False))
    layers = [layer for layer in model._flatten_layers() if isinstance(layer, MultiHeadAttention)]
    assert layers and all(layer.fused_attention for layer in layers)
    for layer in layers:
        layer.fused_attention = False
    explicit_tokens = _np(greedy_decode(model, sources, 12, 1, 2, jit_compile=False))
    np.testing.assert_array_equal(fused_tokens, explicit_tokens)
