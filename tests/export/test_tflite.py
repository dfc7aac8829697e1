import os

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.export import TranslatorModule
from keras_transformer.export import check_tflite_ops
from keras_transformer.export import export_tflite
from keras_transformer.export import tflite_op_names
from keras_transformer.export.tflite import TFTEXT_CUSTOM_OPS
from keras_transformer.translators import TFLiteTranslator
from tests.export.helpers import BAD_INPUTS
from tests.export.helpers import SENTENCES


def test_only_builtin_and_tensorflow_text_ops(exported):
    names = tflite_op_names(exported["tflite"])
    assert not [n for n in names if n.startswith("Flex")], names
    assert check_tflite_ops(exported["tflite"]) == names
    assert "WHILE" in names and "DYNAMIC_UPDATE_SLICE" in names  # the cached decoding loop
    assert {"FastWordpieceTokenizeWithOffsets", "TFText>FastWordpieceDetokenize"} <= set(names)
    assert not {"VAR_HANDLE", "READ_VARIABLE"} & set(names)  # weights are frozen into the loop


def test_check_rejects_flex_and_unknown_custom_ops(tmp_path):
    class Lower(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve(self, text):
            return {"translation": tf.strings.lower(text)}

    module = Lower()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([module.serve.get_concrete_function()], module)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS, tf.lite.OpsSet.SELECT_TF_OPS]
    flex_model = converter.convert()
    assert "FlexStringLower" in tflite_op_names(flex_model)
    with pytest.raises(ValueError, match="Flex"):
        check_tflite_ops(flex_model)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = True
    custom_model = converter.convert()
    with pytest.raises(ValueError, match="custom ops \\['StringLower'\\]"):
        check_tflite_ops(custom_model)
    assert "StringLower" not in TFTEXT_CUSTOM_OPS


def test_signature_takes_and_returns_strings(exported):
    from keras_transformer.translators import TFLiteTranslator

    fresh = TFLiteTranslator(exported["tflite"])  # the shared one is resized by whichever test translated first
    signatures = fresh.interpreter.get_signature_list()
    assert signatures == {"serving_default": {"inputs": ["text"], "outputs": ["translation"]}}
    details = fresh.runner.get_input_details()["text"]
    assert details["dtype"] == np.bytes_ and list(details["shape_signature"]) == [-1]


@pytest.mark.parametrize("batch_size", [1, 4])
def test_translations_equal_the_saved_model(saved_translator, tflite_translator, batch_size):
    expected = saved_translator.translate(SENTENCES, beam_size=None)
    assert tflite_translator.translate(SENTENCES, batch_size=batch_size) == expected
    assert len(set(expected)) > 1


def test_the_decoding_fixed_in_the_file_is_the_only_one(tflite_translator):
    for name in ("beam_size", "length_penalty", "max_length"):
        with pytest.raises(ValueError, match=f"{name}=2: .* decodes with the {name.replace('_', ' ')} it was exported"):
            tflite_translator.translate(["a"], **{name: 2})


def test_bad_inputs_return_strings(saved_translator, tflite_translator):
    outputs = tflite_translator.translate(BAD_INPUTS)
    assert outputs == saved_translator.translate(BAD_INPUTS, beam_size=None)
    assert outputs[:3] == ["", "", ""]


@pytest.mark.slow
def test_beam_search_model_equals_the_saved_model(run, saved_translator, tmp_path):
    module = TranslatorModule.from_run(run, beam_size=4)
    path = export_tflite(module, str(tmp_path / "beam.tflite"))
    assert "TOPK_V2" in check_tflite_ops(path)
    expected = saved_translator.translate(SENTENCES + BAD_INPUTS, beam_size=4)
    assert TFLiteTranslator(path).translate(SENTENCES + BAD_INPUTS, batch_size=3) == expected


@pytest.mark.slow
def test_float16_weights_convert_and_run(run, exported, tmp_path):
    module = TranslatorModule.from_run(run)
    path = export_tflite(module, str(tmp_path / "half.tflite"), quantize="float16")
    assert os.path.getsize(path) < os.path.getsize(exported["tflite"])  # graph, not weights, dominates this model
    assert "DEQUANTIZE" in check_tflite_ops(path)
    outputs = TFLiteTranslator(path).translate(SENTENCES + BAD_INPUTS)
    assert all(isinstance(o, str) for o in outputs) and outputs[len(SENTENCES):][:3] == ["", "", ""]
    with pytest.raises(ValueError, match="quantize"):
        export_tflite(module, str(tmp_path / "x.tflite"), quantize="int4")
