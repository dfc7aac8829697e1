"""Deployment: a trained model and its tokenizers as one string-to-string graph, saved as SavedModel or TFLite.

- `TranslatorModule`: the `tf.Module` (tokenize -> encode -> KV-cached greedy/beam decoding -> detokenize).
- `export_saved_model` / `SavedModelTranslator`: the SavedModel and a Python client for it (the CLI's).
- `export_tflite` / `TFLiteTranslator`: the TFLite model (builtins + tensorflow-text ops) and a client for it.
- `export_run`: what `keras-transformer export` does.
"""

from keras_transformer.export.exporter import export_run
from keras_transformer.export.saved_model import SavedModelTranslator
from keras_transformer.export.saved_model import export_saved_model
from keras_transformer.export.tflite import TFLiteTranslator
from keras_transformer.export.tflite import check_tflite_ops
from keras_transformer.export.tflite import export_tflite
from keras_transformer.export.tflite import tflite_op_names
from keras_transformer.export.translator_module import TranslatorModule

__all__ = [
    "SavedModelTranslator",
    "TFLiteTranslator",
    "TranslatorModule",
    "check_tflite_ops",
    "export_run",
    "export_saved_model",
    "export_tflite",
    "tflite_op_names",
]
