import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer.decoding import greedy_search
from keras_transformer.models import TransformerParts
from tests.backend_helpers import compile_function
from tests.decoding.helpers import END
from tests.decoding.helpers import START
from tests.decoding.helpers import VARIANTS
from tests.decoding.helpers import check_padding_after_end
from tests.decoding.helpers import digit_sources
from tests.decoding.helpers import eager_beam_search as beam_search
from tests.decoding.helpers import eager_greedy_decode as greedy_decode
from tests.decoding.helpers import pad_to
from tests.decoding.helpers import reference_greedy
from tests.decoding.helpers import sources
from tests.decoding.helpers import tiny_model
from tests.decoding.helpers import to_numpy
from tests.decoding.helpers import trained_reversal_model


def _frequent_token(model, src, max_length):
    """A token greedy decoding produces early in some rows: as `end_id` it makes rows end."""
    tokens = to_numpy(greedy_decode(model, src, max_length, START, END))
    return int(tokens[1, 1])


@pytest.mark.parametrize("variant", VARIANTS.values(), ids=VARIANTS.keys())
def test_cached_decoding_matches_full_forward(variant):
    model = tiny_model(**variant)
    src = sources()
    end_id = _frequent_token(model, src, 8)
    tokens = greedy_decode(model, src, 8, START, end_id)
    expected = reference_greedy(model, src, 8, end_id)
    np.testing.assert_array_equal(pad_to(tokens, 8), expected)
    check_padding_after_end(tokens, 8, end_id)
    assert keras.backend.standardize_dtype(tokens.dtype) == "int32"


def test_padded_batch_rows_match_decoding_alone():
    model = tiny_model()
    src = sources()
    batched = pad_to(greedy_decode(model, src, 8, START, END), 8)
    for row in range(len(src)):
        alone_src = src[row:row + 1, : int((src[row] != 0).sum())]
        alone = pad_to(greedy_decode(model, alone_src, 8, START, END), 8)
        np.testing.assert_array_equal(batched[row:row + 1], alone)


def test_stops_early_with_the_same_tokens_as_a_fixed_step_count():
    model = trained_reversal_model()  # its rows end (with end_id) after different lengths
    src = digit_sources()
    early = to_numpy(greedy_decode(model, src, 10, START, END))
    fixed = to_numpy(greedy_decode(model, src, 10, START, END, stop_early=False))
    np.testing.assert_array_equal(pad_to(early, 10), pad_to(fixed, 10))
    lengths = (early != 0).sum(1)
    assert np.all(early[np.arange(len(early)), lengths - 1] == END)
    assert len(set(lengths)) > 1 and early.shape[1] == lengths.max() < 10  # trimmed to the longest row
    check_padding_after_end(early, 10)
    assert tuple(greedy_decode(model, src, 1, START, END).shape) == (6, 1)


def test_compiled_function_matches_eager():
    """Under the backend's compiler (`tf.function(jit_compile=True)`, `jax.jit`) the output keeps its full width."""
    model = tiny_model()
    src = sources()
    eager = pad_to(greedy_decode(model, src, 8, START, END), 8)
    compiled = compile_function(lambda ids: greedy_decode(model, ids, 8, START, END))(src)
    assert tuple(compiled.shape) == (4, 8)
    np.testing.assert_array_equal(to_numpy(compiled), eager)


@pytest.mark.tensorflow_only
def test_traced_functions_match_eager():
    import tensorflow as tf

    model = tiny_model()
    src = sources()
    eager = pad_to(greedy_decode(model, src, 8, START, END), 8)
    signature = [tf.TensorSpec([None, None], tf.int32)]
    exported_style = tf.function(lambda ids: greedy_decode(model, ids, 8, START, END), input_signature=signature)
    out = exported_style(tf.constant(src))
    assert out.shape.as_list() == [4, 8]  # full width inside a traced function
    np.testing.assert_array_equal(to_numpy(out), eager)
    other_shape = src[:1, :3]  # the same concrete function serves any batch and source length
    expected = pad_to(greedy_decode(model, other_shape, 8, START, END), 8)
    np.testing.assert_array_equal(to_numpy(exported_style(tf.constant(other_shape))), expected)
    xla = tf.function(lambda ids: greedy_decode(model, ids, 8, START, END), jit_compile=True)
    np.testing.assert_array_equal(to_numpy(xla(src)), eager)


def test_model_loaded_from_keras_file_decodes_the_same(tmp_path):
    model = tiny_model(**VARIANTS["pre-norm-shared-tied"])
    src = sources()
    expected = to_numpy(greedy_decode(model, src, 6, START, END))
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(to_numpy(greedy_decode(loaded, src, 6, START, END)), expected)
    parts = TransformerParts.from_model(loaded)  # the exporter's entry point: no keras.Model needed
    np.testing.assert_array_equal(pad_to(greedy_search(parts, src, 6, START, END), 6), pad_to(expected, 6))


def test_arguments_are_checked():
    model = tiny_model()
    src = sources()
    with pytest.raises(ValueError, match="max_length"):
        greedy_decode(model, src, 0, START, END)
    with pytest.raises(TypeError, match="Python int"):
        greedy_decode(model, src, 4.0, START, END)
    with pytest.raises(ValueError, match="start_id=40"):
        greedy_decode(model, src, 4, 40, END)
    with pytest.raises(ValueError, match="end_id=0"):
        greedy_decode(model, src, 4, START, 0)
    with pytest.raises(ValueError, match="batch, source_length"):
        greedy_decode(model, src[0], 4, START, END)
    with pytest.raises(ValueError, match="not a keras_transformer seq2seq model"):
        greedy_decode(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]), src, 4, START, END)
    with pytest.raises(TypeError, match="build_transformer"):
        greedy_decode("model.keras", src, 4, START, END)
    learned = tiny_model(position="learned")
    with pytest.raises(ValueError, match="learned position"):
        greedy_decode(learned, src, 33, START, END)



def test_first_argmax_matches_numpy_and_takes_the_lowest_id_on_ties():
    from keras_transformer.decoding.loop_ops import first_argmax

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(6, 50)).astype("float32")
    logits[1, [3, 7, 40]] = 10.0  # a three-way tie
    logits[2] = -1e9  # every id equally (im)possible
    logits[3, 0] = -0.0  # signed zeros tie with +0.0
    logits[3, 1:] = -1.0
    logits[3, 5] = 0.0
    got = np.asarray(ops.convert_to_numpy(first_argmax(ops.convert_to_tensor(logits))))
    np.testing.assert_array_equal(got, np.argmax(logits, axis=-1))
    assert got[1] == 3 and got[2] == 0 and got[3] == 0
    with_nan = np.full((1, 50), np.nan, "float32")
    assert int(ops.convert_to_numpy(first_argmax(ops.convert_to_tensor(with_nan)))[0]) == 49


def test_padding_and_the_start_token_are_never_generated():
    # A model whose logits favour the start token and padding by far: the decoders still never choose either.
    from keras_transformer import build_transformer

    model = build_transformer(40, 40, num_layers=1, d_model=16, num_heads=2, d_ff=32, dropout=0.0, max_length=16,
                              share_embeddings=True, tie_output=True, output_bias=True)
    bias = np.zeros(40, "float32")
    bias[[0, START]] = 1e4
    model.logits_bias.bias.assign(bias)
    src = sources()
    for tokens in (greedy_decode(model, src, 6, START, END), beam_search(model, src, 6, START, END, beam_size=3)):
        tokens = to_numpy(tokens)
        assert tokens.shape[1] == 6 and (tokens[:, 0] != 0).all() and not (tokens == START).any()


def test_force_end_ends_rows_that_reach_the_last_position():
    # A model that never chooses [END] by itself: with force_end every row's last token is [END], the tokens before
    # it are the unforced ones, and beam search (transformers' forced_eos_token_id) does the same.
    from keras_transformer import build_transformer

    model = build_transformer(40, 40, num_layers=1, d_model=16, num_heads=2, d_ff=32, dropout=0.0, max_length=16,
                              share_embeddings=True, tie_output=True, output_bias=True)
    bias = np.zeros(40, "float32")
    bias[END] = -1e4
    model.logits_bias.bias.assign(bias)
    src = sources()
    plain = to_numpy(greedy_decode(model, src, 6, START, END))
    forced = to_numpy(greedy_decode(model, src, 6, START, END, force_end=True))
    assert not (plain == END).any() and (forced[:, -1] == END).all()
    np.testing.assert_array_equal(forced[:, :-1], plain[:, :-1])
    beams = to_numpy(beam_search(model, src, 6, START, END, beam_size=3, force_end=True))
    assert beams.shape[1] == 6 and (beams[:, -1] == END).all() and not (beams[:, :-1] == END).any()
