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
from keras_transformer.export.ctranslate2_model import CTranslate2Translator
from keras_transformer.export.saved_model import SavedModelTranslator
from keras_transformer.export.tflite import TFLiteTranslator
from keras_transformer.tasks import TransformerSeq2SeqLM

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
