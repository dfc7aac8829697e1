"""Tasks in keras-hub's sense: a model with its tokenizers and decoding, saved and loaded as presets.

* `TransformerSeq2SeqLM`: translation (`generate()`, `save_to_preset()`, `from_preset()`).
"""

from keras_transformer.tasks.seq2seq_lm import PresetError
from keras_transformer.tasks.seq2seq_lm import TransformerSeq2SeqLM

__all__ = ["PresetError", "TransformerSeq2SeqLM"]
