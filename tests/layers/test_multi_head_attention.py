import numpy as np
import pytest
from keras import ops

from keras_transformer.layers import MultiHeadAttention
from tests.layer_testing import run_layer_test


def _np(x):
    return np.asarray(ops.convert_to_numpy(x))


def reference_attention(layer, query, value, mask=None):
    """The paper's formula in NumPy, on the layer's own weights."""
    w = {v.path.split("/")[-2] + "/" + v.path.split("/")[-1]: _np(v) for v in layer.weights}
    h, dk = layer.num_heads, layer.key_dim

    def heads(x, name):
        y = x @ w[f"{name}/kernel"] + w[f"{name}/bias"]
        return y.reshape(y.shape[0], y.shape[1], h, dk)

    q, k, v = heads(query, "query"), heads(value, "key"), heads(value, "value")
    logits = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(layer.key_dim)
    if mask is not None:
        logits = np.where(mask[:, None], logits, -np.inf)
    logits = logits - logits.max(-1, keepdims=True)
    weights = np.exp(logits)
    weights = weights / weights.sum(-1, keepdims=True)
    context = np.einsum("bhqk,bkhd->bqhd", weights, v)
    context = context.reshape(context.shape[0], context.shape[1], -1)
    return context @ w["output/kernel"] + w["output/bias"]


def test_layer_contract(tmp_path):
    x = np.random.rand(2, 5, 8).astype("float32")
    y = np.random.rand(2, 7, 8).astype("float32")
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 2, "key_dim": 4, "dropout": 0.1},
        [x, y],
        expected_output_shape=(2, 5, 8),
        tmp_path=tmp_path,
    )


def test_layer_contract_causal_rotary(tmp_path):
    x = np.random.rand(2, 5, 8).astype("float32")
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 2, "key_dim": 4, "use_rotary": True, "use_bias": False},
        [x, x],
        call_kwargs={"use_causal_mask": True},
        expected_output_shape=(2, 5, 8),
        tmp_path=tmp_path,
    )


def test_matches_numpy_reference_of_the_paper_formula():
    layer = MultiHeadAttention(num_heads=4, key_dim=3, output_dim=6)
    query = np.random.rand(2, 5, 10).astype("float32")
    value = np.random.rand(2, 7, 12).astype("float32")
    out = _np(layer(query, value))
    np.testing.assert_allclose(out, reference_attention(layer, query, value), rtol=1e-4, atol=1e-5)
    mask = np.random.rand(2, 5, 7) > 0.3
    mask[..., 0] = True
    out = _np(layer(query, value, attention_mask=mask))
    np.testing.assert_allclose(out, reference_attention(layer, query, value, mask), rtol=1e-4, atol=1e-5)


def test_causal_mask_blocks_future_tokens():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    x = np.random.rand(1, 6, 8).astype("float32")
    out, scores = layer(x, x, use_causal_mask=True, return_attention_scores=True)
    scores = _np(scores)
    assert np.all(scores[0][:, np.triu_indices(6, 1)[0], np.triu_indices(6, 1)[1]] == 0)
    changed = x.copy()
    changed[:, 4:] = np.random.rand(1, 2, 8)
    out2 = layer(changed, changed, use_causal_mask=True)
    np.testing.assert_allclose(_np(out)[:, :4], _np(out2)[:, :4], rtol=1e-5, atol=1e-6)
    assert not np.allclose(_np(out)[:, 4:], _np(out2)[:, 4:])


def test_value_padding_gets_no_attention_and_does_not_change_outputs():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    q = np.random.rand(2, 3, 8).astype("float32")
    v = np.random.rand(2, 6, 8).astype("float32")
    v_mask = np.array([[True] * 4 + [False] * 2, [True] * 6])
    out, scores = layer(q, v, value_mask=v_mask, return_attention_scores=True)
    assert np.all(_np(scores)[0, :, :, 4:] == 0)
    v2 = v.copy()
    v2[0, 4:] = 100.0 * np.random.rand(2, 8)
    out2 = layer(q, v2, value_mask=v_mask)
    np.testing.assert_allclose(_np(out), _np(out2), rtol=1e-5, atol=1e-5)
    # Equal to attending over the unpadded sequence alone.
    alone = layer(q[:1], v[:1, :4])
    np.testing.assert_allclose(_np(out)[:1], _np(alone), rtol=1e-5, atol=1e-5)


def test_keras_masks_on_inputs_are_honoured():
    from keras_transformer.layers import PositionalEmbedding

    emb = PositionalEmbedding(20, 8)
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    ids = np.array([[3, 4, 5, 0, 0]])
    x = emb(ids)
    _, scores = layer(x, x, return_attention_scores=True)
    assert np.all(_np(scores)[0, :, :3, 3:] == 0)


@pytest.mark.every_case  # the cases vary what the backend computes (dtypes, compilation)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_masking_is_safe_in_half_precision(dtype):
    layer = MultiHeadAttention(num_heads=2, key_dim=4, dtype=f"mixed_{dtype}")
    x = (np.random.rand(2, 6, 8) * 50).astype("float32")
    mask = np.array([[True] * 3 + [False] * 3, [True] * 6])
    out, scores = layer(x, x, value_mask=mask, use_causal_mask=True, return_attention_scores=True)
    out, scores = _np(ops.cast(out, "float32")), _np(ops.cast(scores, "float32"))
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(scores))
    np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-2)
    assert np.all(scores[0, :, :, 3:] == 0)


def test_dropout_only_in_training():
    layer = MultiHeadAttention(num_heads=2, key_dim=4, dropout=0.5)
    x = np.random.rand(2, 6, 8).astype("float32")
    np.testing.assert_allclose(_np(layer(x, x)), _np(layer(x, x)))
    assert not np.allclose(_np(layer(x, x, training=True)), _np(layer(x, x)))


@pytest.mark.parametrize("use_rotary", [False, True])
def test_cached_self_attention_matches_full_causal_attention(use_rotary):
    layer = MultiHeadAttention(num_heads=2, key_dim=4, use_rotary=use_rotary)
    x = np.random.rand(2, 5, 8).astype("float32")
    full = _np(layer(x, x, use_causal_mask=True))
    cache = np.zeros((2, 2, 2, 8, 4), "float32")
    for i in range(5):
        step, cache = layer(x[:, i:i + 1], x[:, i:i + 1], cache=cache, cache_index=i)
        np.testing.assert_allclose(_np(step)[:, 0], full[:, i], rtol=1e-5, atol=1e-5)


def test_cross_attention_cache_matches_direct_call():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    q = np.random.rand(2, 3, 8).astype("float32")
    v = np.random.rand(2, 6, 8).astype("float32")
    mask = np.array([[True] * 4 + [False] * 2, [True] * 6])
    direct = _np(layer(q, v, value_mask=mask))
    cache = layer.compute_cache(v)
    cached, same_cache = layer(q, None, value_mask=mask, cache=cache)
    np.testing.assert_allclose(_np(cached), direct, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(_np(same_cache), _np(cache))


def test_rotary_scores_depend_on_relative_position_only():
    layer = MultiHeadAttention(num_heads=1, key_dim=8, use_rotary=True, use_bias=False)
    token = np.random.rand(1, 1, 8).astype("float32")
    other = np.random.rand(1, 1, 8).astype("float32")
    # Same two tokens at offsets (0, 1) and (3, 4): the score of the second on the first is equal.
    seq_a = np.concatenate([other, token, np.zeros((1, 3, 8), "float32")], axis=1)
    seq_b = np.concatenate([np.zeros((1, 3, 8), "float32"), other, token], axis=1)
    _, sa = layer(seq_a, seq_a, use_causal_mask=True, return_attention_scores=True)
    _, sb = layer(seq_b, seq_b, use_causal_mask=True, return_attention_scores=True)
    qa = _np(layer.rotary(layer.project_query(seq_a)))
    ka = _np(layer.rotary(layer.project_key(seq_a)))
    qb = _np(layer.rotary(layer.project_query(seq_b)))
    kb = _np(layer.rotary(layer.project_key(seq_b)))
    np.testing.assert_allclose((qa[0, 1] * ka[0, 0]).sum(), (qb[0, 4] * kb[0, 3]).sum(), rtol=1e-4)


def test_missing_value_is_a_clear_error():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    with pytest.raises(ValueError, match="needs `value`"):
        layer(np.zeros((1, 2, 8), "float32"), None)
