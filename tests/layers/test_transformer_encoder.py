import numpy as np
import pytest
from keras import ops

from keras_transformer.layers import PositionalEmbedding
from keras_transformer.layers import TransformerEncoder
from tests.layer_testing import run_layer_test


def _np(x):
    return np.asarray(ops.convert_to_numpy(x))


@pytest.mark.parametrize("norm_first", [False, True])
def test_layer_contract(norm_first, tmp_path):
    x = np.random.rand(2, 6, 16).astype("float32")
    run_layer_test(
        TransformerEncoder,
        {"d_model": 16, "num_heads": 4, "d_ff": 32, "dropout": 0.1, "norm_first": norm_first},
        [x],
        expected_output_shape=(2, 6, 16),
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_padding_does_not_change_outputs(norm_first):
    emb = PositionalEmbedding(30, 16)
    enc = TransformerEncoder(16, 4, 32, norm_first=norm_first)
    ids = np.array([[5, 6, 7, 8]])
    padded = np.array([[5, 6, 7, 8, 0, 0, 0]])
    short = _np(enc(emb(ids)))
    long = _np(enc(emb(padded)))
    np.testing.assert_allclose(long[:, :4], short, rtol=1e-5, atol=1e-5)


def test_explicit_padding_mask_equals_keras_mask():
    emb = PositionalEmbedding(30, 16)
    enc = TransformerEncoder(16, 4, 32)
    ids = np.array([[5, 6, 7, 0, 0], [1, 2, 3, 4, 5]])
    x = emb(ids)
    by_keras_mask = _np(enc(x))
    by_argument = _np(enc(_np(x), padding_mask=ids != 0))
    np.testing.assert_allclose(by_keras_mask, by_argument, rtol=1e-6, atol=1e-6)


def test_output_keeps_the_padding_mask():
    emb = PositionalEmbedding(30, 16)
    enc = TransformerEncoder(16, 4, 32)
    out = enc(emb(np.array([[5, 6, 0]])))
    assert _np(out._keras_mask).tolist() == [[True, True, False]]


def test_pre_and_post_norm_differ_and_both_normalize():
    x = np.random.rand(1, 5, 16).astype("float32") * 3
    post = _np(TransformerEncoder(16, 4, 32, norm_first=False)(x))
    pre = _np(TransformerEncoder(16, 4, 32, norm_first=True)(x))
    # Post-norm outputs are layer-normalized; pre-norm outputs keep the residual stream's scale.
    np.testing.assert_allclose(post.mean(-1), 0.0, atol=1e-4)
    np.testing.assert_allclose(post.std(-1), 1.0, atol=1e-2)
    assert not np.allclose(pre.std(-1), 1.0, atol=1e-2)


def test_d_model_must_divide_into_heads():
    with pytest.raises(ValueError, match="divisible"):
        TransformerEncoder(10, 3, 20)


def test_activation_dropout_controls_the_dropout_inside_the_ffn_only():
    x = np.random.rand(2, 6, 16).astype("float32")
    only_ffn = TransformerEncoder(16, 4, 32, dropout=0.0, attention_dropout=0.0, activation_dropout=0.5)
    assert not np.allclose(_np(only_ffn(x, training=True)), _np(only_ffn(x, training=False)))
    none = TransformerEncoder(16, 4, 32, dropout=0.0, activation_dropout=0.0)
    np.testing.assert_array_equal(_np(none(x, training=True)), _np(none(x, training=False)))
    assert TransformerEncoder(16, 4, 32, dropout=0.3).activation_dropout == 0.3  # default: `dropout`
    restored = TransformerEncoder.from_config(only_ffn.get_config())
    assert restored.activation_dropout == 0.5 and restored.dropout == 0.0
