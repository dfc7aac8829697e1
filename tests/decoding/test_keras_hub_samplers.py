"""The samplers are keras-hub samplers too: subclasses, serialization, keras-hub's step protocol, and `decode`."""

import keras
import keras_hub
import numpy as np
import pytest
from keras import ops

from keras_transformer.decoding import beam_search
from keras_transformer.decoding import greedy_decode
from keras_transformer.decoding import sample_decode
from keras_transformer.decoding.samplers import BeamSampler
from keras_transformer.decoding.samplers import GreedySampler
from keras_transformer.decoding.samplers import RandomSampler
from keras_transformer.decoding.samplers import Sampler
from keras_transformer.decoding.samplers import TopKSampler
from keras_transformer.decoding.samplers import TopPSampler
from keras_transformer.decoding.samplers import get_sampler
from keras_transformer.models import build_transformer

START, END = 2, 3
SOURCES = np.array([[START, 5, 6, 7, END, 0], [START, 9, 8, END, 0, 0]], dtype="int32")
PAIRS = [
    (GreedySampler(force_end=True), keras_hub.samplers.GreedySampler),
    (BeamSampler(2, 1.0, "transformers"), keras_hub.samplers.BeamSampler),
    (RandomSampler(temperature=0.7, seed=4), keras_hub.samplers.RandomSampler),
    (TopKSampler(k=3, temperature=0.5, seed=1), keras_hub.samplers.TopKSampler),
    (TopPSampler(p=0.8, k=6), keras_hub.samplers.TopPSampler),
]
# The next token's logits given the previous token: [vocabulary 6, vocabulary 6].
TABLE = np.random.default_rng(0).normal(size=(6, 6)).astype("float32")
PROMPT = np.array([[1, 0, 0, 0, 0, 0], [4, 0, 0, 0, 0, 0]], dtype="int32")


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(3)
    return build_transformer(40, 40, num_layers=1, d_model=16, num_heads=2, d_ff=32, dropout=0.0, max_length=16)


def table_next(prompt, cache, index):
    """A keras-hub `next`: the logits of `TABLE`'s row for the token before the position being written."""
    previous = ops.take(prompt, index - 1, axis=1)
    return ops.take(ops.convert_to_tensor(TABLE), previous, axis=0), None, cache


@pytest.mark.parametrize("sampler, keras_hub_class", PAIRS)
def test_each_sampler_is_the_matching_keras_hub_sampler(sampler, keras_hub_class):
    assert isinstance(sampler, keras_hub_class) and isinstance(sampler, keras_hub.samplers.Sampler)
    assert isinstance(sampler, Sampler) and get_sampler(sampler) is sampler


@pytest.mark.parametrize("sampler, keras_hub_class", PAIRS)
def test_keras_hub_serialization_round_trips_the_config(sampler, keras_hub_class):
    config = keras_hub.samplers.serialize(sampler)
    assert config["registered_name"] == f"keras_transformer>{type(sampler).__name__}"
    for again in (keras_hub.samplers.deserialize(config), keras_hub.samplers.get(config), get_sampler(config)):
        assert type(again) is type(sampler) and again.get_config() == sampler.get_config()


def test_a_keras_hub_model_compiles_with_them():
    inputs = keras.Input((None,), dtype="int32")
    lm = keras_hub.models.Seq2SeqLM(inputs=inputs, outputs=keras.layers.Embedding(10, 4)(inputs))
    sampler = TopKSampler(k=2, seed=1)
    lm.compile(sampler=sampler)
    assert lm.sampler is sampler


def test_get_sampler_refuses_keras_hubs_own_samplers():
    for other in (keras_hub.samplers.GreedySampler(), keras_hub.samplers.serialize(keras_hub.samplers.GreedySampler())):
        with pytest.raises(ValueError, match="unknown sampler"):
            get_sampler(other)


def test_greedy_in_keras_hubs_protocol_picks_the_argmax():
    tokens = ops.convert_to_numpy(GreedySampler()(table_next, PROMPT, index=1))
    expected = PROMPT.copy()
    for i in range(1, 6):
        expected[:, i] = TABLE[expected[:, i - 1]].argmax(-1)
    np.testing.assert_array_equal(tokens, expected)


def test_top_k_in_keras_hubs_protocol_draws_among_the_k_best():
    tokens = ops.convert_to_numpy(TopKSampler(k=2, seed=5)(table_next, PROMPT, index=1))
    best_two = np.argsort(TABLE, axis=-1)[:, -2:]
    assert all(tokens[b, i] in best_two[tokens[b, i - 1]] for b in range(2) for i in range(1, 6))


def test_beam_in_keras_hubs_protocol_needs_no_length_penalty():
    with pytest.raises(ValueError, match="length penalty runs in keras_transformer's decoders"):
        BeamSampler(2, 0.6)(table_next, PROMPT, index=1)
    ours = BeamSampler(2, length_penalty=0.0)(table_next, PROMPT, index=1)
    theirs = keras_hub.samplers.BeamSampler(num_beams=2)(table_next, PROMPT, index=1)
    np.testing.assert_array_equal(ops.convert_to_numpy(ours), ops.convert_to_numpy(theirs))


def test_force_end_and_whole_models_stay_in_decode(model):
    with pytest.raises(ValueError, match="force_end"):
        GreedySampler(force_end=True)(table_next, PROMPT, index=1)
    with pytest.raises(TypeError, match=r"sampler\.decode\(model"):
        GreedySampler()(model, SOURCES, 10, START, END)


def test_decode_runs_the_packages_decoders(model):
    np.testing.assert_array_equal(GreedySampler().decode(model, SOURCES, 10, START, END),
                                  greedy_decode(model, SOURCES, 10, START, END))
    np.testing.assert_array_equal(BeamSampler(3, 0.6).decode(model, SOURCES, 10, START, END),
                                  beam_search(model, SOURCES, 10, START, END, beam_size=3, length_penalty=0.6))
    sampled = TopKSampler(k=4, seed=7).decode(model, SOURCES, 10, START, END)
    np.testing.assert_array_equal(sampled, TopKSampler(k=4, seed=7).decode(model, SOURCES, 10, START, END))
    np.testing.assert_array_equal(sampled, sample_decode(model, SOURCES, 10, START, END, top_k=4, seed=7))


def test_seeds_must_be_ints():
    assert TopPSampler(seed=np.int64(3)).get_config()["seed"] == 3
    with pytest.raises(TypeError, match="`seed` must be a Python int"):
        RandomSampler(seed="3")
