"""`SavedModelTranslator`: translates with a SavedModel directory written by `keras_transformer.export`."""

import json
import os

import tensorflow as tf

from keras_transformer.decoding import arguments
from keras_transformer.decoding.base_translator import BaseTranslator
from keras_transformer.decoding.base_translator import check_fixed_setting
from keras_transformer.decoding.base_translator import translate_in_batches
from keras_transformer.decoding.languages import check_languages
from keras_transformer.decoding.languages import row_codes
from keras_transformer.decoding.loop_ops import NEG
from keras_transformer.export.saved_model import CONFIG_FILE


def _first_line(error):
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def _read_number(module, name, kind=int):
    value = getattr(module, name, None)
    return None if value is None else kind(value.numpy())


class SavedModelTranslator(BaseTranslator):
    """Translates with an exported SavedModel directory; the `translate` of every translator (`BaseTranslator`).

    Sentences are sorted by length and sent in batches (the graph pads each batch to its longest sentence); every
    sentence's translation is independent of its batch.

    The decoding is fixed at export time. `beam_size=1` uses the `translate_greedy` signature; a `beam_size` equal
    to the exported `beam_size` uses `serving_default`; one equal to the width of `translate_beam` uses that
    signature; `beam_size=None` uses `serving_default` whatever it does. Other widths raise `ValueError`
    (re-export with `keras-transformer export RUN --beam-size K`). Likewise `length_penalty` and `max_length` may
    only be `None` or the exported ones.

    Args:
        path: a directory written by `export_saved_model` (or any SavedModel whose `serving_default` maps
            `text` strings to `translation` strings).

    Example:

    >>> translator = SavedModelTranslator(saved_model_dir)  # a directory written by `export_run`
    >>> len(translator.translate(["the first of May, nineteen ninety-nine", ""]))
    2
    """

    def __init__(self, path):
        import tensorflow_text  # noqa: F401 (registers the tokenizer ops the graph uses)

        if not os.path.exists(os.path.join(path, "saved_model.pb")):
            raise FileNotFoundError(f"{path}/saved_model.pb: not found; expected a directory from `export`")
        self.path = path
        try:
            self.module = tf.saved_model.load(path)
        except Exception as error:  # noqa: BLE001 - TensorFlow raises many kinds for a damaged directory
            raise ValueError(f"{path}: not a SavedModel that loads (damaged or truncated?): "
                             f"{_first_line(error)}") from None
        self.signatures = dict(self.module.signatures)
        if "serving_default" not in self.signatures:
            raise ValueError(f"{path}: the SavedModel has no `serving_default` signature")
        self.max_length = _read_number(self.module, "max_length")
        self.beam_size = _read_number(self.module, "beam_size")
        self.extra_beam_size = _read_number(self.module, "extra_beam_size")
        self.length_penalty = _read_number(self.module, "length_penalty", float)
        codes = getattr(self.module, "language_codes", None)
        self.languages = tuple(c.decode("utf-8") for c in codes.numpy().tolist()) if codes is not None else ()
        self.source_language = (self.module.source_language.numpy().decode("utf-8") or None) if self.languages \
            else None
        self.default_languages = (self.source_language, None)

    def _signature(self, beam_size):
        if beam_size is None:
            return self.signatures["serving_default"]
        if beam_size == 1 and "translate_greedy" in self.signatures:
            return self.signatures["translate_greedy"]
        if beam_size == self.beam_size:
            return self.signatures["serving_default"]
        if beam_size == self.extra_beam_size and "translate_beam" in self.signatures:
            return self.signatures["translate_beam"]
        available = sorted({b for b in (1 if "translate_greedy" in self.signatures else None, self.beam_size,
                                        self.extra_beam_size) if b is not None})
        raise ValueError(
            f"{self.path} was exported for beam sizes {available}, not {beam_size}; re-export with "
            f"`keras-transformer export RUN_DIR --beam-size {beam_size}` or translate the run directory"
        )

    def translate(self, texts, beam_size=None, length_penalty=None, batch_size=32, max_length=None, verbose=0,
                  source_language=None, target_language=None):
        """Translates a list of sentences; returns a list of strings in the same order.

        Args:
            texts: a list of `str` (or UTF-8 `bytes`).
            beam_size: `None` the export's default decoding; 1 greedy; another width must have been exported (see
                the class docs).
            length_penalty: `None` or the exported one (fixed at export).
            batch_size: sentences per call of the graph.
            max_length: `None` or the exported `max_length` (fixed at export).
            verbose: 0 quiet, 1 a progress bar.
            source_language: a multilingual export's source language code, one or one per text (see
                `Translator.translate`).
            target_language: its target language code(s), the same way.

        Returns:
            The translations (empty or whitespace-only inputs give `""`).
        """
        if self.languages:
            return self._translate_languages(texts, beam_size, length_penalty, batch_size, max_length, verbose,
                                             (source_language, target_language))
        check_languages(None, None, source_language, target_language)  # a one-pair export refuses them
        signature = self._signature(beam_size)
        check_fixed_setting(self.path, "length_penalty", length_penalty, self.length_penalty, "--length-penalty")
        if max_length is not None and max_length != self.max_length:
            raise ValueError(
                f"{self.path} decodes at most {self.max_length} tokens (fixed at export); got max_length="
                f"{max_length}. Re-export with `keras-transformer export RUN_DIR --max-length {max_length}`"
            )

        def translate_batch(batch):
            result = signature(text=tf.constant(batch, dtype=tf.string))["translation"].numpy()
            return [text.decode("utf-8", errors="replace") for text in result]

        return translate_in_batches(texts, batch_size, verbose, translate_batch)

    def _translate_languages(self, texts, beam_size, length_penalty, batch_size, max_length, verbose, pair):
        """`translate` of a multilingual export, through its `translate_languages` signature."""
        if beam_size not in (None, self.beam_size):
            raise ValueError(f"{self.path} was exported for beam size {self.beam_size}, not {beam_size}; re-export "
                             f"with `keras-transformer export RUN_DIR --beam-size {beam_size}`")
        check_fixed_setting(self.path, "length_penalty", length_penalty, self.length_penalty, "--length-penalty")
        check_fixed_setting(self.path, "max_length", max_length, self.max_length, "--max-length")
        sources = row_codes(self.languages, pair[0], len(texts), self.source_language, "source_language")
        targets = row_codes(self.languages, pair[1], len(texts), None, "target_language")

        def translate_batch(batch, source, target):
            result = self._call("translate_languages", text=batch, source_language=source, target_language=target)
            return [text.decode("utf-8", errors="replace") for text in result["translation"].numpy()]

        return translate_in_batches(texts, batch_size, verbose, translate_batch, columns=(sources, targets))

    # The signatures behind the translator methods beyond `translate` (older exports lack them).
    _SIGNATURE_OF = {"translate_n_best": "n_best", "score": "score", "translate_with_prefix": "translate_with_prefix"}

    def supports(self, method):
        needed = self._SIGNATURE_OF.get(method)
        return super().supports(method) and (needed is None or needed in self.signatures)

    def _call(self, name, **inputs):
        if name not in self.signatures:
            raise ValueError(f"{self.path} has no `{name}` signature; re-export it with `keras-transformer export`")
        return self.signatures[name](**{k: tf.constant(v, dtype=tf.string) for k, v in inputs.items()})

    def translate_n_best(self, texts, n_best, beam_size=None, length_penalty=None, batch_size=32, max_length=None):
        """The `n_best` best translations of each text (`BaseTranslator.translate_n_best`) from the `n_best`
        signature: a beam of the export's `extra_beam_size`, so `n_best` may be at most that."""
        n_best = arguments.check_positive_int("n_best", n_best)
        if n_best > self.extra_beam_size:
            raise ValueError(f"n_best={n_best}: {self.path} keeps the {self.extra_beam_size} best hypotheses of its "
                             f"beam; re-export with `--beam-size {n_best}` or use the run directory")
        check_fixed_setting(self.path, "beam_size", beam_size, self.extra_beam_size, "--beam-size")
        check_fixed_setting(self.path, "length_penalty", length_penalty, self.length_penalty, "--length-penalty")

        def call(batch):
            result = self._call("n_best", text=batch)
            pairs = zip(result["translations"].numpy(), result["scores"].numpy())
            lists = [[(t.decode("utf-8", errors="replace"), float(s)) for t, s in list(zip(ts, ss))[:n_best]
                      if s > NEG / 2] for ts, ss in pairs]
            # A blank text (no source token) has one empty translation, as a run's translator gives it.
            return [[("", 0.0)] if all(h == ("", 0.0) for h in hyps) else hyps for hyps in lists]

        return translate_in_batches(texts, batch_size, 0, call)

    def score(self, texts, translations, normalize=False, batch_size=32):
        """The log-probability of given translations (`BaseTranslator.score`) from the `score` signature."""

        def call(batch, targets):
            result = {k: v.numpy() for k, v in self._call("score", text=batch, translation=targets).items()}
            rows = []
            for ids, values, tokens in zip(result["token_ids"], result["token_scores"], result["tokens"]):
                length = int((ids != 0).sum())
                token_scores = [float(v) for v in values[:length]]
                total = float(sum(token_scores))
                rows.append({"score": total / length if normalize else total, "token_scores": token_scores,
                             "tokens": [t.decode("utf-8", errors="replace") for t in tokens[:length]]})
            return rows

        return translate_in_batches(texts, batch_size, 0, call, columns=(translations,))

    def translate_with_prefix(self, texts, prefixes, beam_size=None, length_penalty=None, batch_size=32,
                              max_length=None):
        """Translations forced through target prefixes (`BaseTranslator.translate_with_prefix`), with the
        export's decoding, from the `translate_with_prefix` signature."""
        check_fixed_setting(self.path, "beam_size", beam_size, self.beam_size, "--beam-size")
        check_fixed_setting(self.path, "length_penalty", length_penalty, self.length_penalty, "--length-penalty")

        def call(batch, prefix):
            result = self._call("translate_with_prefix", text=batch, prefix=prefix)["translation"].numpy()
            return [t.decode("utf-8", errors="replace") for t in result]

        return translate_in_batches(texts, batch_size, 0, call, columns=(prefixes,))

    def translate_with_ids(self, texts):
        """One batch through `translate_with_ids`: `(translations, token_ids [B, max_length], scores [B])`."""
        if "translate_with_ids" not in self.signatures:
            raise ValueError(f"{self.path} has no `translate_with_ids` signature")
        encoded = [t.encode("utf-8") if isinstance(t, str) else bytes(t) for t in texts]
        result = self.signatures["translate_with_ids"](text=tf.constant(encoded, dtype=tf.string))
        translations = [t.decode("utf-8", errors="replace") for t in result["translation"].numpy()]
        return translations, result["token_ids"].numpy(), result["scores"].numpy()

    def config(self):
        """The export settings written next to the SavedModel (`assets.extra/keras_transformer.json`), or `{}`."""
        path = os.path.join(self.path, CONFIG_FILE)
        if not os.path.exists(path):
            return {}
        with open(path, encoding="utf-8") as f:
            return json.load(f)
