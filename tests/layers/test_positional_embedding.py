import numpy as np
import pytest
from keras import ops

from keras_transformer.layers import PositionalEmbedding
from keras_transformer.layers.positional_embedding import sinusoidal_encoding
from tests.layer_testing import run_layer_test


@pytest.mark.parametrize("position", ["sinusoidal", "sinusoidal_concat", "sinusoidal_fairseq", "learned", "none"])
def test_layer_contract(position, tmp_path):
    ids = np.random.randint(1, 50, size=(2, 6)).astype("int32")
    run_layer_test(
        PositionalEmbedding,
        {"vocab_size": 50, "d_model": 8, "max_length": 16, "position": position},
        [ids],
        expected_output_shape=(2, 6, 8),
        tmp_path=tmp_path,
    )


def test_padding_mask_marks_id_zero():
    layer = PositionalEmbedding(20, 4)
    ids = np.array([[3, 4, 0, 0], [5, 0, 0, 0]])
    mask = ops.convert_to_numpy(layer.compute_mask(ids))
    assert mask.tolist() == [[True, True, False, False], [True, False, False, False]]
    out = layer(ids)
    assert ops.convert_to_numpy(out._keras_mask).tolist() == mask.tolist()


def test_sinusoidal_matches_paper_formula():
    d_model, length = 6, 5
    enc = ops.convert_to_numpy(sinusoidal_encoding(ops.arange(length), d_model))
    pos = np.arange(length)[:, None]
    i = np.arange(d_model // 2)[None]
    expected = np.zeros((length, d_model))
    expected[:, 0::2] = np.sin(pos / 10000 ** (2 * i / d_model))
    expected[:, 1::2] = np.cos(pos / 10000 ** (2 * i / d_model))
    np.testing.assert_allclose(enc, expected, atol=1e-5)


@pytest.mark.parametrize("d_model", [6, 7])
def test_sinusoidal_concat_is_marians_layout(d_model):
    # Marian's table, written as its source writes it: angle pos / 10000**(2 * (j // 2) / d) for feature j, then the
    # sines of the even features in the first half and the cosines of the odd ones in the second half.
    length = 9
    angles = np.array([[pos / np.power(10000, 2 * (j // 2) / d_model) for j in range(d_model)]
                       for pos in range(length)])
    half = -(-d_model // 2)
    expected = np.zeros((length, d_model))
    expected[:, :half] = np.sin(angles[:, 0::2])
    expected[:, half:] = np.cos(angles[:, 1::2])
    enc = ops.convert_to_numpy(sinusoidal_encoding(ops.arange(length), d_model, concat=True))
    np.testing.assert_allclose(enc, expected, atol=1e-5)
    layer = PositionalEmbedding(10, d_model, position="sinusoidal_concat", scale=False)
    out = ops.convert_to_numpy(layer(np.array([[1, 2, 3]]), start_index=4))
    table = ops.convert_to_numpy(layer.embeddings)
    np.testing.assert_allclose(out[0], table[[1, 2, 3]] + expected[4:7], atol=1e-5)


@pytest.mark.parametrize("d_model", [8, 7])
def test_sinusoidal_fairseq_is_m2m_100s_table(d_model):
    # fairseq's table as M2M-100 and NLLB compute it: h = d // 2 frequencies exp(-i * log(10000) / (h - 1)), all sines
    # then all cosines, a zero column for odd d, and our position p at fairseq's row p + 2 (padding_idx 1, + 1).
    half = d_model // 2
    freq = np.exp(-np.arange(half) * np.log(10000) / (half - 1))
    rows = np.arange(20)[:, None] * freq[None]
    table = np.concatenate([np.sin(rows), np.cos(rows), np.zeros((20, d_model % 2))], axis=1)
    enc = ops.convert_to_numpy(sinusoidal_encoding(ops.arange(9), d_model, fairseq=True))
    np.testing.assert_allclose(enc, table[2:11], atol=1e-5)
    layer = PositionalEmbedding(10, d_model, position="sinusoidal_fairseq", scale=False)
    out = ops.convert_to_numpy(layer(np.array([[1, 2, 3]]), start_index=np.array([4])))
    np.testing.assert_allclose(out[0], ops.convert_to_numpy(layer.embeddings)[[1, 2, 3]] + table[6:9], atol=1e-5)


def test_embedding_is_scaled_token_plus_position():
    layer = PositionalEmbedding(10, 4, position="sinusoidal")
    ids = np.array([[1, 2, 3]])
    out = ops.convert_to_numpy(layer(ids))
    table = ops.convert_to_numpy(layer.embeddings)
    pos = ops.convert_to_numpy(sinusoidal_encoding(ops.arange(3), 4))
    np.testing.assert_allclose(out[0], table[[1, 2, 3]] * 2.0 + pos, atol=1e-5)


def test_sinusoidal_works_past_max_length_and_start_index_offsets():
    layer = PositionalEmbedding(10, 8, max_length=4)
    ids = np.random.randint(1, 10, size=(1, 12))
    full = ops.convert_to_numpy(layer(ids))
    assert full.shape == (1, 12, 8)
    tail = ops.convert_to_numpy(layer(ids[:, 7:], start_index=7))
    np.testing.assert_allclose(tail, full[:, 7:], atol=1e-5)


def test_learned_positions_reject_too_long_input():
    layer = PositionalEmbedding(10, 8, max_length=4, position="learned")
    with pytest.raises(ValueError, match="max_length=4"):
        layer(np.ones((1, 5), "int32"))


def test_unknown_position_type_is_rejected():
    with pytest.raises(ValueError, match="position"):
        PositionalEmbedding(10, 8, position="absolute")


def test_reverse_projects_to_vocabulary_with_the_embedding_matrix():
    layer = PositionalEmbedding(10, 4)
    layer.build()
    x = np.random.rand(2, 3, 4).astype("float32")
    logits = ops.convert_to_numpy(layer(x, reverse=True))
    np.testing.assert_allclose(logits, x @ ops.convert_to_numpy(layer.embeddings).T, rtol=1e-5, atol=1e-5)
    assert logits.dtype == np.float32


def test_int8_quantization_keeps_rows_within_half_a_step_and_saves_its_scales(tmp_path):
    import keras

    layer = PositionalEmbedding(50, 8, position="none", scale=False)
    layer.build()
    table = ops.convert_to_numpy(layer.embeddings).copy()
    ids = np.array([[1, 7, 49, 0]])
    layer.quantize("int8")
    assert layer.quantization_mode == "int8" and layer.embeddings.dtype == "int8"
    step = np.abs(table).max(axis=1) / 127.0
    rows = ops.convert_to_numpy(layer(ids))[0]
    assert np.all(np.abs(rows - table[ids[0]]) <= step[ids[0], None] / 2 + 1e-7)
    x = np.random.rand(1, 2, 8).astype("float32")
    np.testing.assert_allclose(ops.convert_to_numpy(layer(x, reverse=True)),
                               x @ ops.convert_to_numpy(layer.embedding_matrix()).T, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError):
        layer.quantize("int4")
    # A fresh layer quantized the same way reads the saved int8 table and scales back.
    path = str(tmp_path / "embedding.weights.h5")
    model = keras.Sequential([keras.Input((4,), dtype="int32"), layer])
    model.save_weights(path)
    again = PositionalEmbedding(50, 8, position="none", scale=False)
    other = keras.Sequential([keras.Input((4,), dtype="int32"), again])
    again.quantize("int8")
    other.load_weights(path)
    np.testing.assert_array_equal(ops.convert_to_numpy(again(ids)), ops.convert_to_numpy(layer(ids)))
