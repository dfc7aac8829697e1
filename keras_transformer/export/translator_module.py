"""`TranslatorModule`: text in, text out, in one TensorFlow graph (for SavedModel and TFLite export)."""

import json

import keras
import tensorflow as tf

from keras_transformer.data.packing import pack_sources
from keras_transformer.decoding import arguments
from keras_transformer.decoding import loop_ops
from keras_transformer.decoding.beam_search import beam_search_with_parts
from keras_transformer.decoding.beam_search import check_length_penalty_rule
from keras_transformer.decoding.beam_search import length_penalty_divisor
from keras_transformer.decoding.beam_search import next_token_log_probs
from keras_transformer.decoding.greedy import decode_token_by_token
from keras_transformer.export.language_signatures import multilingual_signatures
from keras_transformer.models.ensemble import EnsembleParts
from keras_transformer.models.transformer_parts import TransformerParts

FORMAT = "keras_transformer.TranslatorModule"
FORMAT_VERSION = 1
# Width of the `translate_beam` signature when the default decoding is greedy.
DEFAULT_EXTRA_BEAM_SIZE = 4
# With `jit_compile`, sources are padded to a multiple of this many positions and batches to 1, 2, 4, 8 rows or a
# multiple of 8, so that XLA compiles one program per (batch bucket, width bucket) and reuses it.
WIDTH_BUCKET = 8
BATCH_BUCKET = 8


def _choose_argmax(logits, step):
    return loop_ops.first_argmax(logits)


class TranslatorModule(tf.Module):
    """A trained seq2seq model and its tokenizers as one string-to-string `tf.Module`.

    Every signature runs in a single graph: tokenize the source (tensorflow-text's FastWordpiece), lay the ids out
    as training did (`[START] tokens[:source_max_length - 2] [END]`, 0-padded to the longest row of the batch), run
    the encoder once, decode with preallocated key/value caches for a fixed `max_length` steps at most (greedy or
    beam search, a `tf.while_loop` with static loop shapes), and detokenize. Only integer, float and
    tensorflow-text ops are used, so the same graph saves as a SavedModel and converts to TFLite with builtin ops
    plus tensorflow-text's custom ops (see `export_saved_model` and `export_tflite`).

    Decoding runs as one XLA program by default (`jit_compile=True`): without it, TensorFlow's graph executor
    dispatches every small op of every step on its own (each cache update included), which one compiled loop
    avoids. Tokenizing and detokenizing stay graph ops around it. The source is padded to a multiple of
    `WIDTH_BUCKET` positions and the batch to 1, 2, 4, 8 or a multiple of `BATCH_BUCKET` rows (by repeating its
    first row, so the loop ends when the real rows do), so XLA compiles one program per bucket, on its first use,
    and reuses it. TF Serving runs such a SavedModel with `--xla_cpu_compilation_enabled=true`; `jit_compile=False`
    gives plain graph ops that run anywhere (the TFLite export always uses those).

    Rows are independent: padding is masked, so a sentence's translation does not depend on the rest of its batch.
    An input without any token (empty or whitespace-only) translates to the empty string; a longer input than
    the model's `max_length` is truncated; characters outside the vocabulary become `[UNK]`; invalid UTF-8 is
    tokenized byte-wise by FastWordpiece (never an error).

    Signatures (all take `text`: `tf.string [batch]`):

    - `translate` (saved as `serving_default`): `{"translation": tf.string [batch]}` with the export's decoding
      (`beam_size == 1`: greedy; otherwise beam search of that width).
    - `translate_with_ids`: the same decoding, plus `token_ids` (int32 `[batch, max_length]`, after `[START]`,
      `[END]` included, 0 after it) and `scores` (float32 `[batch]`, the length-penalized log-probability
      `log_prob / ((5 + length) / 6) ** length_penalty` of each output, or `log_prob / length ** length_penalty`
      with `length_penalty_rule="transformers"`; 0 for an empty input).
    - `translate_greedy`: greedy decoding, `{"translation"}`.
    - `translate_beam`: beam search of width `beam_size` (or `DEFAULT_EXTRA_BEAM_SIZE` when the export is
      greedy), `{"translation"}`.
    - `n_best`: the `extra_beam_size` best hypotheses of a beam that wide, `{"translations", "scores"}` `[B, K]`.
    - `score` (takes `text` and `translation`): `{"score", "token_scores", "token_ids"}`, the log-probability of
      given translations (forced decoding).
    - `translate_with_prefix` (takes `text` and `prefix`): `{"translation"}`, decoding forced through each
      prefix's tokens first.

    Export settings are kept as variables, readable after loading: `max_length`, `beam_size`,
    `extra_beam_size` (the width of `translate_beam`), `source_max_length`, `length_penalty`,
    `length_penalty_rule`, `format` and `format_version`.

    An ensemble exports the same way: pass a list of models (`keras-transformer ensemble` members, sharing the
    tokenizers) and every step decodes with the mean of their next-token log-probabilities (`EnsembleParts`;
    `combine="prob"`: the log of the mean of their probabilities), in the same graph; `scores` are then the
    ensemble's log-probabilities, length-penalized.

    Args:
        model: a model from `keras_transformer.build_transformer` (or loaded back from `.keras`), or a list of
            them: an ensemble.
        source_tokenizer: the source `keras_transformer.data.SubwordTokenizer`.
        target_tokenizer: the target tokenizer (may be the same object).
        max_length: Python int, most output tokens (`[END]` included); it sizes the preallocated caches.
            Defaults to the model's `max_length`.
        beam_size: Python int, decoding of `translate`/`serving_default`: 1 greedy, more for beam search.
        length_penalty: float >= 0, the length penalty's exponent (GNMT's alpha), for beam search and `scores`.
        length_penalty_rule: `"gnmt"` or `"transformers"`: how beam search scores hypotheses and stops, and how
            `scores` are computed (see `keras_transformer.decoding.beam_search`).
        force_end: a translation that reaches `max_length` ends there (transformers' `forced_eos_token_id`;
            an imported checkpoint's `decoding.json` sets it).
        jit_compile: bool, decode through XLA in the SavedModel signatures (see above).
        combine: how an ensemble combines its members, "log_prob" or "prob" (`EnsembleParts`); one model
            ignores it.
        name: module name.

    Example:

    >>> run = keras_transformer.training.load_run("runs/dates")  # doctest: +SKIP
    >>> module = TranslatorModule(run.model, run.source_tokenizer, run.target_tokenizer)  # doctest: +SKIP
    >>> module.translate(tf.constant(["the first of May, nineteen ninety-nine"]))["translation"]  # doctest: +SKIP
    <tf.Tensor: shape=(1,), dtype=string, numpy=array([b'1999-05-01'], dtype=object)>
    """

    def __init__(
        self,
        model,
        source_tokenizer,
        target_tokenizer,
        max_length=None,
        beam_size=1,
        length_penalty=0.6,
        jit_compile=True,
        combine="log_prob",
        name="translator",
        length_penalty_rule="gnmt",
        force_end=False,
    ):
        super().__init__(name=name)
        models = list(model) if isinstance(model, (list, tuple)) else [model]
        if not models:
            raise ValueError("`model` is an empty list; pass a model or the models of an ensemble.")
        parts = TransformerParts.from_model(models[0]) if len(models) == 1 else EnsembleParts(models, combine)
        members = parts.members if isinstance(parts, EnsembleParts) else [parts]
        self._parts = parts
        # Every member reads the same source ids: as many positions as the shortest encoder has.
        self._source_max_length = min(int(m.encoder_embedding.max_length) for m in members)
        if self._source_max_length < 3:
            raise ValueError(
                f"The model's max_length={self._source_max_length} leaves no room for source tokens "
                "between [START] and [END]."
            )
        self._max_length = arguments.check_max_length(parts.max_length if max_length is None else max_length, parts)
        self._beam_size = arguments.check_positive_int("beam_size", beam_size)
        self._extra_beam_size = self._beam_size if self._beam_size > 1 else DEFAULT_EXTRA_BEAM_SIZE
        self._length_penalty = arguments.check_number("length_penalty", length_penalty, low=0.0)
        self._length_penalty_rule = check_length_penalty_rule(length_penalty_rule)
        self._force_end = bool(force_end)
        if not isinstance(jit_compile, bool):
            raise TypeError(f"`jit_compile` must be True or False; got {jit_compile!r}")
        self._jit_compile = jit_compile
        for member in members:
            if source_tokenizer.vocab_size != member.encoder_embedding.vocab_size:
                raise ValueError(
                    f"The source tokenizer has {source_tokenizer.vocab_size} tokens but the model's source "
                    f"embedding has {member.encoder_embedding.vocab_size}; pass the tokenizers the model was "
                    "trained with."
                )
        if target_tokenizer.vocab_size != parts.vocab_size:
            raise ValueError(
                f"The target tokenizer has {target_tokenizer.vocab_size} tokens but the model's output has "
                f"{parts.vocab_size}; pass the tokenizers the model was trained with."
            )
        # `model` (one model) or `models` (an ensemble's, in order): tracked, so their weights are saved.
        if len(models) == 1:
            self.model = models[0]
        else:
            self.models = models
        self._models = models
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer

        def constant(value, dtype, var_name):
            return tf.Variable(value, dtype=dtype, trainable=False, name=var_name)

        self.max_length = constant(self._max_length, tf.int32, "max_length")
        self.beam_size = constant(self._beam_size, tf.int32, "beam_size")
        self.extra_beam_size = constant(self._extra_beam_size, tf.int32, "extra_beam_size")
        self.source_max_length = constant(self._source_max_length, tf.int32, "source_max_length")
        self.length_penalty = constant(self._length_penalty, tf.float32, "length_penalty")
        self.length_penalty_rule = constant(self._length_penalty_rule, tf.string, "length_penalty_rule")
        self.jit_compile = constant(self._jit_compile, tf.bool, "jit_compile")
        self.format = constant(FORMAT, tf.string, "format")
        self.format_version = constant(FORMAT_VERSION, tf.int32, "format_version")
        if getattr(target_tokenizer, "languages", None):  # what a client checks language codes against
            self.language_codes = constant(list(target_tokenizer.languages), tf.string, "language_codes")
            self.source_language = constant(getattr(source_tokenizer, "source_language", None) or "", tf.string,
                                            "source_language")

    @classmethod
    def from_run(cls, run, **kwargs):
        """A `TranslatorModule` for a `keras_transformer.training.Run`, a run directory written by `train`, or an
        ensemble (`keras_transformer.runs.Ensemble` or a directory written by `keras-transformer ensemble`).

        Args:
            run: a `Run` (from `train` or `load_run`), an `Ensemble`, or the path of either's directory.
            **kwargs: `max_length`, `beam_size`, `length_penalty`, `length_penalty_rule`, `force_end`, `jit_compile`,
                `name`
                (an ensemble's `combine` comes from it).

        Returns:
            A `TranslatorModule`.
        """
        if isinstance(run, (str, bytes)) or hasattr(run, "__fspath__"):
            from keras_transformer.runs.ensemble import load_run_or_ensemble

            run = load_run_or_ensemble(run)
        if hasattr(run, "models"):  # an Ensemble
            return cls(run.models, run.source_tokenizer, run.target_tokenizer, combine=run.combine, **kwargs)
        return cls(run.model, run.source_tokenizer, run.target_tokenizer, **kwargs)

    def get_config(self):
        """The export settings as a JSON-friendly dict."""
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "max_length": self._max_length,
            "beam_size": self._beam_size,
            "extra_beam_size": self._extra_beam_size,
            "source_max_length": self._source_max_length,
            "length_penalty": self._length_penalty,
            "length_penalty_rule": self._length_penalty_rule,
            "force_end": self._force_end,
            "ensemble_size": len(self._models),
            "ensemble_combine": self._parts.combine if len(self._models) > 1 else None,
            "jit_compile": self._jit_compile,
            "source_vocab_size": self.source_tokenizer.vocab_size,
            "target_vocab_size": self.target_tokenizer.vocab_size,
            "languages": list(getattr(self.target_tokenizer, "languages", None) or []),
            "keras_version": keras.__version__,
            "tensorflow_version": tf.__version__,
        }

    def to_json(self):
        return json.dumps(self.get_config(), indent=1)

    # ----------------------------------------------------------------------------------------------------------
    # Graph pieces (called while tracing).

    def encode_text(self, text, language_ids=None):
        """Source ids `[START] tokens [END]` int32 `[B, S]` (S = longest row + 2) and `has_tokens` bool `[B]`;
        with `language_ids` (int32 `[B]`), each row starts with its own id instead (a source language's code)."""
        tokenizer = self.source_tokenizer
        if language_ids is None:
            return pack_sources(tokenizer.tokenize(text), tokenizer.source_start_id, tokenizer.end_id,
                                self._source_max_length)
        ids, has_tokens = pack_sources(tokenizer.tokenize(text), None, tokenizer.end_id, self._source_max_length - 1)
        return tf.concat([tf.expand_dims(language_ids, 1), ids], axis=1), has_tokens

    def encode_target(self, text, with_end):
        """Target ids of `text` int32 `[B, T]` (0-padded; `[END]` after each row's tokens when `with_end`, and
        at most `max_length - 1` tokens before it) and `has_tokens` bool `[B]`."""
        tokenizer = self.target_tokenizer
        ids, has_tokens = pack_sources(tokenizer.tokenize(text), None, tokenizer.end_id, self._max_length)
        return (ids if with_end else tf.where(tf.equal(ids, tokenizer.end_id), 0, ids)), has_tokens

    def decode_ids(self, source_ids, beam_size, with_scores=True, prefix=None, num_hypotheses=1, first_token=None):
        """Output ids int32 `[B, max_length]` (0 after `[END]`) and length-penalized scores float32 `[B]`.

        Greedy decoding computes its scores with an extra teacher-forced pass, only `with_scores` (otherwise the
        scores are `None`); beam search has them anyway. `prefix` (int32 `[B, P]`) forces each row's first
        tokens; `num_hypotheses` n > 1 returns `[B, n, max_length]` and `[B, n]` (beam search as wide as needed);
        `first_token` (int32 `[B]`) is each row's first token at no cost (a target language's code).
        """
        start_id, end_id = self.target_tokenizer.start_id, self.target_tokenizer.end_id
        if beam_size > 1 or num_hypotheses > 1:
            return beam_search_with_parts(
                self._parts, source_ids, self._max_length, start_id, end_id,
                beam_size=max(beam_size, num_hypotheses), length_penalty=self._length_penalty,
                length_penalty_rule=self._length_penalty_rule, force_end=self._force_end, prefix=prefix,
                num_hypotheses=num_hypotheses, first_token=first_token,
            )
        if first_token is not None:
            prefix = tf.expand_dims(first_token, 1)
        tokens = decode_token_by_token(self._parts, source_ids, self._max_length, start_id, end_id, _choose_argmax,
                                       force_end=self._force_end, prefix=prefix)
        return tokens, (self.score(source_ids, tokens) if with_scores else None)

    def token_log_probs(self, source_ids, tokens):
        """Each token's log-probability float32 `[B, T]` (0 at padding) given `source_ids`: one teacher-forced pass,
        as `score` computes it, without the length penalty."""
        start = tf.fill([tf.shape(tokens)[0], 1], tf.constant(self.target_tokenizer.start_id, tf.int32))
        decoder_inputs = tf.concat([start, tokens[:, :-1]], axis=1)
        members = [tf.nn.log_softmax(tf.cast(model({"encoder_inputs": source_ids, "decoder_inputs": decoder_inputs},
                                                   training=False), tf.float32), axis=-1)
                   for model in self._models]
        log_probs = self._parts.combine_log_probs(members) if len(members) > 1 else members[0]
        log_probs = next_token_log_probs(log_probs, self.target_tokenizer.start_id, self._length_penalty_rule)
        chosen = tf.gather(log_probs, tokens, axis=2, batch_dims=2)
        return tf.where(tf.not_equal(tokens, 0), chosen, 0.0)

    def score(self, source_ids, tokens):
        """Length-penalized log-probability of `tokens` `[B, L]` (0-padded) given `source_ids`, float32 `[B]`.

        The same score as beam search gives its hypotheses, by the export's `length_penalty_rule` (which also
        says how padding and the start token, never generated, leave the softmax): one teacher-forced pass of the
        full model (of each member of an ensemble, whose distributions are combined as in decoding: `combine`).
        """
        real = tf.not_equal(tokens, 0)
        total = tf.reduce_sum(self.token_log_probs(source_ids, tokens), axis=1)
        lengths = tf.maximum(tf.reduce_sum(tf.cast(real, tf.int32), axis=1), 1)  # 0 ** alpha for an empty row
        return total / length_penalty_divisor(lengths, self._length_penalty, self._length_penalty_rule)

    def run(self, text, beam_size, with_scores=False, jit_compile=None, prefix=None, num_hypotheses=1,
            languages=None):
        """The whole pipeline: `(translation [B], token_ids [B, max_length], scores [B] or None)`.

        `jit_compile=None` follows the module's setting; `True` decodes in one XLA program over bucketed shapes.
        `prefix` (`tf.string [B]`) forces each translation's beginning; `num_hypotheses` n > 1 gives the n best
        of a beam: translations `[B, n]`, token ids `[B, n, max_length]`, scores `[B, n]`. `languages`: a
        multilingual model's `(source, target)` language code ids, int32 `[B]` each (`language_signatures`).
        """
        jit_compile = self._jit_compile if jit_compile is None else jit_compile
        text = tf.convert_to_tensor(text, tf.string)
        source_ids, has_tokens = self.encode_text(text, None if languages is None else languages[0])
        inputs = [source_ids]
        if languages is not None:  # the target language's code, forced as the first token
            inputs.append(languages[1])
        elif prefix is not None:
            prefix_ids, has_prefix = self.encode_target(tf.convert_to_tensor(prefix, tf.string), with_end=False)
            has_tokens = tf.logical_or(has_tokens, has_prefix)  # a prefix alone is decoded too
            inputs.append(prefix_ids)
        with_scores = with_scores or num_hypotheses > 1

        def decode(ids, forced=None):
            return self.decode_ids(ids, beam_size, with_scores=with_scores, num_hypotheses=num_hypotheses,
                                   prefix=None if languages is not None else forced,
                                   first_token=forced if languages is not None else None)

        if jit_compile:
            batch_size = tf.shape(source_ids)[0]
            compiled = tf.function(decode, jit_compile=True, autograph=False)
            index = self.bucket_rows(batch_size)
            padded = [self.pad_to_buckets(source_ids)] + [tf.gather(p, index) for p in inputs[1:]]
            tokens, scores = compiled(*padded)
            tokens = tokens[:batch_size]
            scores = scores[:batch_size] if with_scores else None
        else:
            tokens, scores = decode(*inputs)
        # An input with no token at all translates to "" (the Python `Translator` does the same for blank lines).
        if num_hypotheses > 1:
            tokens = tf.where(has_tokens[:, None, None], tokens, 0)
            scores = tf.where(has_tokens[:, None], scores, 0.0)
            flat = tf.reshape(tokens, [-1, tf.shape(tokens)[-1]])
            translations = tf.reshape(self.target_tokenizer.detokenize(flat), [-1, num_hypotheses])
            return translations, tokens, scores
        tokens = tf.where(tf.expand_dims(has_tokens, 1), tokens, 0)
        if with_scores:
            scores = tf.where(has_tokens, scores, 0.0)
        return self.target_tokenizer.detokenize(tokens), tokens, scores

    def bucket_rows(self, batch_size):
        """The row index that pads a batch of `batch_size` to its bucket (1, 2, 4, 8 or a multiple of 8 rows):
        the rows in order, then the first row repeated."""
        small = tf.gather(tf.constant([0, 1, 2, 4, 4, 8, 8, 8, 8], tf.int32), tf.minimum(batch_size, 8))
        rows = tf.where(batch_size <= 8, small, -(-batch_size // BATCH_BUCKET) * BATCH_BUCKET)
        return tf.concat([tf.range(batch_size), tf.zeros([rows - batch_size], tf.int32)], axis=0)

    def pad_to_buckets(self, source_ids):
        """`source_ids` `[B, S]` padded to `[bucket(B), min(ceil(S / 8) * 8, source_max_length)]`.

        Extra rows repeat the first row (they end when it does and are dropped afterwards); extra columns are
        padding (id 0, masked), so every real row decodes as it would unpadded.
        """
        batch_size, width = tf.shape(source_ids)[0], tf.shape(source_ids)[1]
        padded_width = tf.minimum(-(-width // WIDTH_BUCKET) * WIDTH_BUCKET, self._source_max_length)
        index = self.bucket_rows(batch_size)
        return tf.pad(tf.gather(source_ids, index), [[0, 0], [0, padded_width - width]])

    def serving_function(self, jit_compile=None):
        """A new `tf.function` `text [B] -> {"translation": [B]}` with the export's decoding (TFLite uses it with
        `jit_compile=False`: the converter needs plain graph ops)."""
        return tf.function(
            lambda text: {"translation": self.run(text, self._beam_size, jit_compile=jit_compile)[0]},
            input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False,
        )

    # ----------------------------------------------------------------------------------------------------------
    # Signatures.

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
    def translate(self, text):
        """`serving_default`: `text` `[B]` -> `{"translation": [B]}` with the export's decoding."""
        translation, _, _ = self.run(text, self._beam_size)
        return {"translation": translation}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
    def translate_with_ids(self, text):
        """`text` `[B]` -> `{"translation", "token_ids", "scores"}` with the export's decoding."""
        translation, tokens, scores = self.run(text, self._beam_size, with_scores=True)
        return {"translation": translation, "token_ids": tokens, "scores": scores}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
    def translate_greedy(self, text):
        """`text` `[B]` -> `{"translation": [B]}` by greedy decoding."""
        translation, _, _ = self.run(text, 1)
        return {"translation": translation}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
    def translate_beam(self, text):
        """`text` `[B]` -> `{"translation": [B]}` by beam search of width `extra_beam_size`."""
        translation, _, _ = self.run(text, self._extra_beam_size)
        return {"translation": translation}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
    def n_best(self, text):
        """`text` `[B]` -> `{"translations": [B, K], "scores": [B, K]}`: the K = `extra_beam_size` best of a beam
        that wide, best first (`scores` length-penalized; `loop_ops.NEG` for a hypothesis that did not end)."""
        translations, _, scores = self.run(text, self._extra_beam_size, num_hypotheses=self._extra_beam_size)
        return {"translations": translations, "scores": scores}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text"),
                                  tf.TensorSpec([None], tf.string, name="translation")], autograph=False)
    def score_translation(self, text, translation):
        """`text`, `translation` `[B]` -> `{"score": [B], "token_scores": [B, T], "token_ids": [B, T], "tokens":
        [B, T]}`: the log-probability of each given translation (its tokens and `[END]`, cut at `max_length`), in
        total and per token (0, and token `""`, at padding)."""
        source_ids, _ = self.encode_text(tf.convert_to_tensor(text, tf.string))
        token_ids, _ = self.encode_target(translation, with_end=True)
        token_scores = self.token_log_probs(source_ids, token_ids)
        tokens = tf.where(tf.not_equal(token_ids, 0), tf.gather(tf.constant(list(self.target_tokenizer.vocab)),
                                                                 token_ids), "")
        return {"score": tf.reduce_sum(token_scores, axis=1), "token_scores": token_scores, "token_ids": token_ids,
                "tokens": tokens}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text"),
                                  tf.TensorSpec([None], tf.string, name="prefix")], autograph=False)
    def translate_with_prefix(self, text, prefix):
        """`text`, `prefix` `[B]` -> `{"translation": [B]}`: the export's decoding, forced through each prefix's
        tokens first."""
        translation, _, _ = self.run(text, self._beam_size, prefix=prefix)
        return {"translation": translation}

    def signatures(self):
        """The SavedModel signatures, `{name: tf.function}` (`tf.saved_model.save` traces them while saving); a
        multilingual model's take language codes (`language_signatures`)."""
        if getattr(self.target_tokenizer, "languages", None):
            return multilingual_signatures(self)
        # Where the export's own decoding is greedy, or a beam as wide as `translate_beam`'s, that signature is
        # `serving_default`'s function under a second name: traced and saved once.
        return {
            "serving_default": self.translate,
            "translate_with_ids": self.translate_with_ids,
            "translate_greedy": self.translate if self._beam_size == 1 else self.translate_greedy,
            "translate_beam": self.translate if self._beam_size == self._extra_beam_size else self.translate_beam,
            "n_best": self.n_best,
            "score": self.score_translation,
            "translate_with_prefix": self.translate_with_prefix,
        }
