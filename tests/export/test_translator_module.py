import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding.translator import encode_sources
from keras_transformer.export import TranslatorModule
from keras_transformer.export.translator_module import FORMAT
from tests.export.helpers import BAD_INPUTS, SENTENCES


def test_source_ids_follow_the_training_layout(run):
    module = TranslatorModule.from_run(run)
    texts = SENTENCES + BAD_INPUTS
    ids, has_tokens = module.encode_text(tf.constant([t.encode("utf-8") if isinstance(t, str) else t for t in texts]))
    ids = ids.numpy()
    expected = encode_sources(run.source_tokenizer, [t.decode("utf-8", "replace") if isinstance(t, bytes) else t
                                                     for t in texts], run.model_config.max_length)
    width = ids.shape[1]
    assert width == run.model_config.max_length  # the long input is truncated to the model's length
    for row, (got, want, text) in enumerate(zip(ids, expected, texts)):
        if isinstance(text, bytes):  # the graph sees the raw bytes, `encode_sources` the replaced text
            assert got[0] == run.source_tokenizer.start_id and run.source_tokenizer.end_id in got
            continue
        np.testing.assert_array_equal(got, np.pad(want, (0, max(0, width - len(want))))[:width], err_msg=text)
    assert has_tokens.numpy().tolist() == [bool(t.strip()) for t in texts[:-1]] + [True]


def test_settings_are_checked_and_kept(run):
    module = TranslatorModule.from_run(run, max_length=12, beam_size=3, length_penalty=0.0)
    config = module.get_config()
    assert (config["max_length"], config["beam_size"], config["extra_beam_size"]) == (12, 3, 3)
    assert config["format"] == FORMAT and int(module.max_length.numpy()) == 12
    assert TranslatorModule.from_run(run).get_config()["extra_beam_size"] == 4
    with pytest.raises(ValueError, match="beam_size"):
        TranslatorModule.from_run(run, beam_size=0)
    with pytest.raises(ValueError, match="tokenizers the model was trained with"):
        TranslatorModule(run.model, run.target_tokenizer, run.target_tokenizer)
