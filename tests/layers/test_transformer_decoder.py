import numpy as np
import pytest
from keras import ops

from keras_transformer.layers import PositionalEmbedding
from keras_transformer.layers import TransformerDecoder
from tests.layer_testing import run_layer_test


def _np(x):
    return np.asarray(ops.convert_to_numpy(x))


@pytest.mark.parametrize("norm_first", [False, True])
def test_layer_contract(norm_first, tmp_path):
    y = np.random.rand(2, 5, 16).astype("float32")
    x = np.random.rand(2, 7, 16).astype("float32")
    run_layer_test(
        TransformerDecoder,
        {"d_model": 16, "num_heads": 4, "d_ff": 32, "dropout": 0.1, "norm_first": norm_first},
        [y, x],
        expected_output_shape=(2, 5, 16),
        tmp_path=tmp_path,
    )


def test_causal_mask_blocks_future_tokens():
    dec = TransformerDecoder(16, 4, 32)
    y = np.random.rand(1, 6, 16).astype("float32")
    x = np.random.rand(1, 4, 16).astype("float32")
    out = _np(dec(y, x))
    y2 = y.copy()
    y2[:, 3:] = np.random.rand(1, 3, 16)
    out2 = _np(dec(y2, x))
    np.testing.assert_allclose(out[:, :3], out2[:, :3], rtol=1e-5, atol=1e-5)
    assert not np.allclose(out[:, 3:], out2[:, 3:])


def test_cross_attention_uses_the_encoder():
    dec = TransformerDecoder(16, 4, 32)
    y = np.random.rand(1, 3, 16).astype("float32")
    a = _np(dec(y, np.random.rand(1, 4, 16).astype("float32")))
    b = _np(dec(y, np.random.rand(1, 4, 16).astype("float32")))
    assert np.abs(a - b).max() > 1e-3


@pytest.mark.parametrize("norm_first", [False, True])
def test_padding_does_not_change_outputs(norm_first):
    src_emb, tgt_emb = PositionalEmbedding(30, 16), PositionalEmbedding(30, 16)
    dec = TransformerDecoder(16, 4, 32, norm_first=norm_first)
    src, tgt = np.array([[4, 5, 6]]), np.array([[7, 8]])
    src_pad, tgt_pad = np.array([[4, 5, 6, 0, 0]]), np.array([[7, 8, 0, 0]])
    short = _np(dec(tgt_emb(tgt), src_emb(src)))
    long = _np(dec(tgt_emb(tgt_pad), src_emb(src_pad)))
    np.testing.assert_allclose(long[:, :2], short, rtol=1e-5, atol=1e-5)
    explicit = _np(dec(_np(tgt_emb(tgt_pad)), _np(src_emb(src_pad)),
                       decoder_padding_mask=tgt_pad != 0, encoder_padding_mask=src_pad != 0))
    np.testing.assert_allclose(explicit, long, rtol=1e-6, atol=1e-6)


def test_cross_attention_ignores_encoder_padding():
    dec = TransformerDecoder(16, 4, 32)
    y = np.random.rand(1, 3, 16).astype("float32")
    x = np.random.rand(1, 6, 16).astype("float32")
    mask = np.array([[True] * 4 + [False] * 2])
    _, scores = dec(y, x, encoder_padding_mask=mask, return_attention_scores=True)
    assert np.all(_np(scores)[..., 4:] == 0)


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_decoding_matches_full_forward(norm_first):
    dec = TransformerDecoder(16, 4, 32, norm_first=norm_first)
    y = np.random.rand(2, 5, 16).astype("float32")
    x = np.random.rand(2, 6, 16).astype("float32")
    enc_mask = np.array([[True] * 4 + [False] * 2, [True] * 6])
    full = _np(dec(y, x, encoder_padding_mask=enc_mask))
    self_cache = np.zeros((2, 2, 4, 5, 4), "float32")
    cross_cache = dec.compute_cross_attention_cache(x)
    for i in range(5):
        step, self_cache, cross_cache = dec(
            y[:, i:i + 1], None, encoder_padding_mask=enc_mask,
            self_attention_cache=self_cache, self_attention_cache_index=i,
            cross_attention_cache=cross_cache,
        )
        np.testing.assert_allclose(_np(step)[:, 0], full[:, i], rtol=1e-5, atol=1e-5)


def test_missing_encoder_sequence_is_a_clear_error():
    dec = TransformerDecoder(16, 4, 32)
    with pytest.raises(ValueError, match="encoder_sequence"):
        dec(np.zeros((1, 2, 16), "float32"))


def test_activation_dropout_controls_the_dropout_inside_the_ffn_only():
    y = np.random.rand(2, 5, 16).astype("float32")
    x = np.random.rand(2, 6, 16).astype("float32")
    only_ffn = TransformerDecoder(16, 4, 32, dropout=0.0, attention_dropout=0.0, activation_dropout=0.5)
    train, infer = only_ffn(y, x, training=True), only_ffn(y, x, training=False)
    assert not np.allclose(np.asarray(ops.convert_to_numpy(train)), np.asarray(ops.convert_to_numpy(infer)))
    none = TransformerDecoder(16, 4, 32, dropout=0.0, activation_dropout=0.0)
    np.testing.assert_array_equal(
        np.asarray(ops.convert_to_numpy(none(y, x, training=True))),
        np.asarray(ops.convert_to_numpy(none(y, x, training=False))),
    )
    assert TransformerDecoder(16, 4, 32, dropout=0.3).activation_dropout == 0.3
    assert TransformerDecoder.from_config(only_ffn.get_config()).activation_dropout == 0.5
