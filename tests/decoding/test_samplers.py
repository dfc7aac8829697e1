"""Samplers: one entry point, one output convention, the same tokens as the decoders they wrap."""

import keras
import numpy as np
import pytest

from keras_transformer.decoding import beam_search
from keras_transformer.decoding import greedy_decode
from keras_transformer.decoding import sample_decode
from keras_transformer.decoding.samplers import SAMPLERS
from keras_transformer.decoding.samplers import BeamSampler
from keras_transformer.decoding.samplers import TopKSampler
from keras_transformer.decoding.samplers import TopPSampler
from keras_transformer.decoding.samplers import generate
from keras_transformer.decoding.samplers import get_sampler
from keras_transformer.decoding.samplers import serialize_sampler
from keras_transformer.models import build_transformer

START, END = 2, 3


@pytest.fixture(scope="module")
def model():
    import keras

    keras.utils.set_random_seed(3)
    return build_transformer(40, 40, num_layers=1, d_model=16, num_heads=2, d_ff=32, dropout=0.0, max_length=16)


SOURCES = np.array([[START, 5, 6, 7, END, 0], [START, 9, 8, END, 0, 0]], dtype="int32")


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_every_sampler_returns_the_one_convention(model, name):
    tokens = np.asarray(generate(model, SOURCES, 10, START, END, sampler=name))
    assert tokens.dtype == np.int32 and tokens.shape[0] == 2 and tokens.shape[1] <= 10
    for row in tokens:
        ends = np.flatnonzero(row == END)
        if ends.size:  # 0 after [END], never 0 before it
            assert (row[ends[0] + 1:] == 0).all() and (row[: ends[0]] != 0).all()


def test_samplers_give_the_wrapped_decoders_tokens(model):
    np.testing.assert_array_equal(generate(model, SOURCES, 10, START, END),
                                  greedy_decode(model, SOURCES, 10, START, END))
    np.testing.assert_array_equal(generate(model, SOURCES, 10, START, END, sampler=BeamSampler(3, 0.6)),
                                  beam_search(model, SOURCES, 10, START, END, beam_size=3, length_penalty=0.6))
    np.testing.assert_array_equal(
        generate(model, SOURCES, 10, START, END, sampler=TopPSampler(p=0.5, k=4, seed=7)),
        sample_decode(model, SOURCES, 10, START, END, top_p=0.5, top_k=4, seed=7))
    # Compiled and eager give the same tokens (not on PyTorch, which decodes eagerly by default: torch.compile
    # unrolls the loop; test_beam_search keeps one compiled check there).
    if keras.backend.backend() != "torch":
        np.testing.assert_array_equal(generate(model, SOURCES, 10, START, END, sampler="beam", jit_compile=True),
                                      generate(model, SOURCES, 10, START, END, sampler="beam"))


def test_the_translator_compiles_by_default_except_on_pytorch(model):
    from keras_transformer.decoding.translator import Translator

    assert Translator(model, None, None).jit_compile == (keras.backend.backend() != "torch")
    assert Translator(model, None, None, jit_compile=False).jit_compile is False


def test_samplers_round_trip_through_their_config_and_refuse_unknown_names():
    for sampler in (BeamSampler(2, 1.0), TopKSampler(k=3, temperature=0.5, seed=1), TopPSampler(p=0.8)):
        again = get_sampler(serialize_sampler(sampler))
        assert type(again) is type(sampler) and again.get_config() == sampler.get_config()
    with pytest.raises(ValueError, match="unknown sampler 'nucleus'"):
        get_sampler("nucleus")
