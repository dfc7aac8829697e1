"""`TFLiteTranslator`: runs a TFLite translator written by `keras_transformer.export` with TensorFlow's interpreter
and the tensorflow-text ops."""

import json
import os
import warnings

import numpy as np

from keras_transformer.decoding.base_translator import BaseTranslator
from keras_transformer.decoding.base_translator import check_fixed_setting
from keras_transformer.decoding.base_translator import translate_in_batches
from keras_transformer.decoding.languages import check_languages
from keras_transformer.export.tflite import SOURCE_FILE
from keras_transformer.export.tflite import tokenizer_path


class TFLiteTranslator(BaseTranslator):
    """Runs a TFLite translator written by `export_tflite` with TensorFlow's interpreter and tensorflow-text ops.

    The `translate` of every translator (`BaseTranslator`). The decoding (beam size, length penalty, `max_length`)
    is fixed in the converted graph and not recorded in the file, so those arguments must be `None`.

    Args:
        path: the `.tflite` file (or its bytes).
        num_threads: interpreter threads (`None`: the interpreter's default).

    Example:

    >>> translator = TFLiteTranslator(tflite_path)  # a file written by `export_tflite` (or `export_run`)
    >>> len(translator.translate(["the first of May, nineteen ninety-nine", ""]))
    2
    """

    def __init__(self, path, num_threads=None):
        import tensorflow_text
        from tensorflow.lite.python.interpreter import InterpreterWithCustomOps

        kwargs = {"model_content": path} if isinstance(path, bytes) else {"model_path": os.fspath(path)}
        self.path = None if isinstance(path, bytes) else os.fspath(path)
        with warnings.catch_warnings():
            # TensorFlow 2.21 announces the move to `ai_edge_litert`; its interpreter is the one tensorflow-text's
            # op registrar is built for.
            warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated")
            self.interpreter = InterpreterWithCustomOps(
                custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS,
                num_threads=num_threads,
                **kwargs,
            )
        self.runner = self.interpreter.get_signature_runner("serving_default")
        self.tokenizer = None
        if "source_ids" in self.runner.get_input_details():  # a multilingual file: its tokenizer is beside it
            from keras_transformer.data.tokenizers import load_tokenizer

            if self.path is None:
                raise ValueError("a multilingual TFLite model is read from its file, beside which its tokenizer is")
            self.tokenizer = load_tokenizer(tokenizer_path(self.path))
            with open(os.path.join(tokenizer_path(self.path), SOURCE_FILE), encoding="utf-8") as f:
                self.source_max_length = int(json.load(f)["source_max_length"])
            self.languages = tuple(self.tokenizer.languages)
            self.default_languages = (self.tokenizer.source_language, self.tokenizer.target_language)

    def translate(self, texts, beam_size=None, length_penalty=None, batch_size=32, max_length=None, verbose=0,
                  source_language=None, target_language=None):
        """Translates Python strings (or UTF-8 bytes); returns a list of strings, in order.

        Args:
            texts: a list of `str` or `bytes`.
            beam_size: `None` (as exported; any other value is a `ValueError`).
            length_penalty: `None` (as exported; any other value is a `ValueError`).
            batch_size: sentences per interpreter call (sorted by length first).
            max_length: `None` (as exported; any other value is a `ValueError`).
            verbose: 0 quiet, 1 a progress bar.
            source_language: a multilingual model's source language code, one or one per text (`None`: its
                default); `None` for a one-pair model.
            target_language: its target language code(s), the same way (required where it has no default).

        Returns:
            The translations (empty or whitespace-only inputs give `""`).
        """
        path = self.path or "the TFLite model"
        check_fixed_setting(path, "beam_size", beam_size, None, "--beam-size")
        check_fixed_setting(path, "length_penalty", length_penalty, None, "--length-penalty")
        check_fixed_setting(path, "max_length", max_length, None, "--max-length")
        if self.tokenizer is not None:
            return self._translate_ids(texts, batch_size, verbose, source_language, target_language)
        check_languages(None, None, source_language, target_language)

        def translate_batch(batch):
            result = self.runner(text=np.array(batch, dtype=object))["translation"]
            return [text.decode("utf-8", errors="replace") for text in result]

        return translate_in_batches(texts, batch_size, verbose, translate_batch)

    def _translate_ids(self, texts, batch_size, verbose, source_language, target_language):
        """`translate` of a multilingual file: tokenized here, token ids through the interpreter."""
        from keras_transformer.data.words import is_blank
        from keras_transformer.decoding.languages import pack_with_languages
        from keras_transformer.decoding.languages import row_codes

        tokenizer = self.tokenizer
        sources = row_codes(self.languages, source_language, len(texts), self.default_languages[0], "source_language")
        targets = row_codes(self.languages, target_language, len(texts), self.default_languages[1], "target_language")

        def translate_batch(batch, source, target):
            todo = [i for i, text in enumerate(batch) if not is_blank(text.decode("utf-8", errors="replace"))]
            outputs = [""] * len(batch)
            if not todo:
                return outputs
            rows = tokenizer.tokenize([batch[i] for i in todo]).to_list()
            ids = pack_with_languages(rows, [tokenizer.language_id(source[i]) for i in todo], tokenizer.end_id,
                                      self.source_max_length)
            first = np.array([tokenizer.language_id(target[i]) for i in todo], "int32")
            tokens = self.runner(source_ids=ids.astype("int32"), target_language_ids=first)["token_ids"]
            for i, text in zip(todo, tokenizer.detokenize(tokens).numpy()):
                outputs[i] = text.decode("utf-8", errors="replace")
            return outputs

        return translate_in_batches(texts, batch_size, verbose, translate_batch, columns=(sources, targets))
