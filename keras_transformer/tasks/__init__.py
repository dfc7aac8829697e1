"""keras-hub's classes for the package's models, registered with Keras (importing `keras_transformer` registers
them, so `keras_hub.models.Seq2SeqLM.from_preset(dir)` finds them).

* `TransformerBackbone` (in `keras_transformer.models`): the model, a keras-hub `Backbone`;
* `TransformerTokenizer`: one side's tokenizer, a keras-hub `Tokenizer`;
* `TransformerSeq2SeqLMPreprocessor`: raw string pairs -> the backbone's inputs, a keras-hub `Seq2SeqLMPreprocessor`;
* `TransformerSeq2SeqLM`: the task (`fit` on strings, `generate()`, presets), a keras-hub `Seq2SeqLM`.
"""

from keras_transformer.tasks.preprocessor import TransformerSeq2SeqLMPreprocessor
from keras_transformer.tasks.presets import PresetError
from keras_transformer.tasks.seq2seq_lm import TransformerSeq2SeqLM
from keras_transformer.tasks.tokenizer import TransformerTokenizer

__all__ = ["PresetError", "TransformerSeq2SeqLM", "TransformerSeq2SeqLMPreprocessor", "TransformerTokenizer"]
