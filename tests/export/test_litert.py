"""ai-edge-litert (TFLite's successor interpreter) runs the exported TFLite translator with tensorflow-text's op
registrar and gives TensorFlow's interpreter's translations; without the registrar it cannot resolve the tokenizer
op."""

import numpy as np
import pytest

from tests.export.helpers import SENTENCES

litert = pytest.importorskip("ai_edge_litert.interpreter")


def test_litert_runs_the_tflite_translator_with_the_tensorflow_text_registrar(exported, tflite_translator):
    import tensorflow_text

    interpreter = litert.InterpreterWithCustomOps(
        custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS, model_path=exported["tflite"])
    translate = interpreter.get_signature_runner("serving_default")
    got = [translate(text=np.array([s], dtype=object))["translation"][0].decode("utf-8") for s in SENTENCES]
    assert got == tflite_translator.translate(SENTENCES)


def test_litert_alone_names_the_missing_tokenizer_op(exported):
    with pytest.raises(RuntimeError, match="unresolved custom op: FastWordpieceTokenize"):
        interpreter = litert.Interpreter(model_path=exported["tflite"])
        interpreter.allocate_tensors()
