"""Deployment: a trained model and its tokenizers as one string-to-string graph, saved as SavedModel or TFLite.

- `export_run`: what `keras-transformer export` does, every format of a run (SavedModel, TFLite, CTranslate2,
  preset) in one call: the entry point.
- `TranslatorModule`: the `tf.Module` (tokenize -> encode -> KV-cached greedy/beam decoding -> detokenize) that the
  SavedModel and TFLite writers take, for code that builds its own module.
- `export_saved_model`, `export_tflite`: those writers.

The clients that translate with what these write are in `keras_transformer.translators`.
"""

from keras_transformer.export.exporter import export_run
from keras_transformer.export.saved_model import export_saved_model
from keras_transformer.export.tflite import check_tflite_ops
from keras_transformer.export.tflite import export_tflite
from keras_transformer.export.tflite import tflite_op_names
from keras_transformer.export.translator_module import TranslatorModule

__all__ = [
    "TranslatorModule",
    "check_tflite_ops",
    "export_run",
    "export_saved_model",
    "export_tflite",
    "tflite_op_names",
]
