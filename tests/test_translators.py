"""Every translator that `keras_transformer.load_translator` returns has one `translate` signature."""

import inspect

import pytest

from keras_transformer.decoding.base_translator import BaseTranslator
from keras_transformer.decoding.samplers import BeamSampler
from keras_transformer.decoding.samplers import GreedySampler
from keras_transformer.decoding.samplers import TopKSampler
from keras_transformer.decoding.translator import Translator
from keras_transformer.decoding.translator import sampler_for
from keras_transformer.decoding.tuning import DecodingSettings
from keras_transformer.tasks import TransformerSeq2SeqLM
from keras_transformer.translators.ctranslate2 import CTranslate2Translator
from keras_transformer.translators.saved_model import SavedModelTranslator
from keras_transformer.translators.tflite import TFLiteTranslator

TRANSLATORS = [Translator, TransformerSeq2SeqLM, SavedModelTranslator, TFLiteTranslator, CTranslate2Translator]


@pytest.mark.parametrize("cls", TRANSLATORS, ids=lambda cls: cls.__name__)
def test_every_translator_has_the_one_translate_signature(cls):
    assert issubclass(cls, BaseTranslator)
    assert inspect.signature(cls.translate) == inspect.signature(BaseTranslator.translate)
    assert list(inspect.signature(cls.translate).parameters) == [
        "self", "texts", "beam_size", "length_penalty", "batch_size", "max_length", "verbose", "source_language",
        "target_language"]


def test_none_decodes_as_the_default_says():
    tuned = DecodingSettings(beam_size=4, length_penalty=1.0, length_penalty_rule="transformers", force_end=True)
    beam = sampler_for(tuned)
    assert isinstance(beam, BeamSampler) and beam.get_config() == {
        "num_beams": 4, "length_penalty": 1.0, "length_penalty_rule": "transformers", "force_end": True}
    assert sampler_for(tuned, beam_size=2).get_config()["length_penalty"] == 1.0
    assert sampler_for(tuned, length_penalty=0.2).get_config()["num_beams"] == 4
    greedy = sampler_for(tuned, beam_size=1)
    assert isinstance(greedy, GreedySampler) and greedy.force_end
    assert isinstance(sampler_for(None), GreedySampler)
    assert sampler_for(None, beam_size=3).get_config()["length_penalty"] == 0.6
    top_k = TopKSampler(k=3)
    assert sampler_for(top_k) is top_k and sampler_for(top_k, length_penalty=1.0) is top_k
    assert isinstance(sampler_for(top_k, beam_size=2), BeamSampler)
    with pytest.raises(ValueError, match="beam_size"):
        sampler_for(None, beam_size=0)


def test_the_one_sort_and_batch_loop_sends_similar_lengths_together_and_answers_in_order():
    from keras_transformer.decoding.base_translator import length_batches
    from keras_transformer.decoding.base_translator import translate_in_batches

    assert length_batches([3, 1, 2, 1], 2) == [[1, 3], [2, 0]]  # stable: equal lengths keep their order
    assert length_batches({4: 5, 7: 0, 9: 2}, 2) == [[7, 9], [4]]
    texts = ["ccc", "a", "bb", "dddd", ""]
    calls = []

    def translate_batch(batch, codes):
        calls.append((batch, codes))
        return [text.decode("utf-8").upper() + code for text, code in zip(batch, codes)]

    codes = ["1", "2", "3", "4", "5"]
    assert translate_in_batches(texts, 2, 0, translate_batch, columns=(codes,)) == ["CCC1", "A2", "BB3", "DDDD4", "5"]
    assert calls == [([b"", b"a"], ["5", "2"]), ([b"bb", b"ccc"], ["3", "1"]), ([b"dddd"], ["4"])]
    with pytest.raises(ValueError, match="5 texts but 4 values"):
        translate_in_batches(texts, 2, 0, translate_batch, columns=(codes[:4],))
    with pytest.raises(ValueError, match="batch_size"):
        translate_in_batches(texts, 0, 0, translate_batch)
