"""`TransformerSeq2SeqLMPreprocessor`: raw (source, target) strings -> the backbone's inputs, keras-hub's way.

A keras-hub `Seq2SeqLMPreprocessor` whose packing is keras-hub's `StartEndPacker`, set to the package's layout:

* sources: `[START] ids[:n - 2] [END]` (no `[START]` for tokenizers whose sources carry none, such as Marian's);
* decoder inputs: `[START] ids`, labels: `ids [END]`, sample weights: 1 where a label is not padding;
* 0-padded, to the longest row of the batch rounded up to a multiple of 16 (at most the sequence length), so a
  batch of short sentences does not run at the longest length the model allows and compiled steps see few shapes.

A multilingual model's tokenizer (NLLB-200, M2M-100) lays out its pairs as transformers' does: sources `[source
language] ids </s>`, decoder inputs `[START] [target language] ids`, labels `[target language] ids </s>`; `generate()`
forces the target language as the first token (transformers' `forced_bos_token_id`). The languages are
`source_language` / `target_language` (codes, `None`: the tokenizer's defaults), or per row in the inputs' dict
(`{"encoder_text": [...], "target_language": [...]}`).

Inputs may be keras-hub's `{"encoder_text": ..., "decoder_text": ...}`, a `(sources, targets)` pair as `x`, or
`x=sources, y=targets`. The outputs are `({"encoder_inputs", "decoder_inputs"}, labels, sample_weight)`, what the
backbone (`build_transformer`'s graph) takes. Separate source and target vocabularies have one tokenizer each
(`tokenizer` and `target_tokenizer`); a shared one leaves `target_tokenizer` `None`.
"""

import keras
import keras_hub
import tensorflow as tf

from keras_transformer.decoding.languages import is_multilingual
from keras_transformer.decoding.languages import language_ids
from keras_transformer.decoding.lru import LRUCache
from keras_transformer.models.backbone import TransformerBackbone
from keras_transformer.tasks.tokenizer import TransformerTokenizer

PAD_MULTIPLE = 16


def _trim(ids, multiple=PAD_MULTIPLE):
    """Drops the all-padding columns of 0-padded `[B, L]` ids beyond the longest row, rounded up to `multiple`."""
    longest = tf.reduce_max(tf.concat([tf.reduce_sum(tf.cast(ids != 0, tf.int32), axis=1), [1]], axis=0))
    width = tf.minimum(tf.shape(ids)[1], (longest + multiple - 1) // multiple * multiple)
    return ids[:, :width]


def _rows(texts):
    """The number of texts: a Python int where it is known, else a scalar tensor."""
    texts = tf.convert_to_tensor(texts, tf.string)
    return texts.shape[0] if texts.shape[0] is not None else tf.shape(texts)[0]


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerSeq2SeqLMPreprocessor(keras_hub.models.Seq2SeqLMPreprocessor):
    """Tokenizes and packs translation pairs for `TransformerSeq2SeqLM` (see the module docstring).

    Args:
        tokenizer: the source side's `TransformerTokenizer` (also the target's when the vocabulary is shared).
        target_tokenizer: the target side's `TransformerTokenizer`, or `None` for a shared vocabulary.
        encoder_sequence_length: the longest packed source (`[START]` and `[END]` included); longer ones are cut.
        decoder_sequence_length: the longest decoder input (`[START]` included) in training, and the most tokens
            `generate()` produces (its `max_length`).
        source_language: a multilingual model's default source language code (`None`: its tokenizer's); a dict
            input's `"source_language"` (a code or one per row) wins.
        target_language: the same for the target language.

    Example (`run_dir` is a directory written by `train`):

    >>> from keras_transformer import load_run
    >>> run = load_run(run_dir)
    >>> preprocessor = TransformerSeq2SeqLMPreprocessor(
    ...     TransformerTokenizer(run.source_tokenizer),
    ...     TransformerTokenizer(run.target_tokenizer, config_file="target_tokenizer.json"),
    ...     encoder_sequence_length=32, decoder_sequence_length=32)
    >>> x, labels, weights = preprocessor((["the first of May, 1999"], ["1999-05-01"]))
    >>> sorted(x), x["encoder_inputs"].shape[1] % 16, int(x["decoder_inputs"][0, 0]), int(labels[0, 0]) != 2
    (['decoder_inputs', 'encoder_inputs'], 0, 2, True)
    """

    backbone_cls = TransformerBackbone
    tokenizer_cls = TransformerTokenizer

    def __init__(self, tokenizer, target_tokenizer=None, encoder_sequence_length=256, decoder_sequence_length=256,
                 source_language=None, target_language=None, **kwargs):
        super().__init__(tokenizer, encoder_sequence_length=encoder_sequence_length,
                         decoder_sequence_length=decoder_sequence_length, **kwargs)
        self.target_tokenizer = target_tokenizer
        self.source_language, self.target_language = source_language, target_language

    @property
    def target(self):
        """The tokenizer of the target side."""
        return self.target_tokenizer if self.target_tokenizer is not None else self.tokenizer

    def build(self, input_shape):
        self.encoder_packer = keras_hub.layers.StartEndPacker(
            start_value=self.tokenizer.source_start_token_id, end_value=self.tokenizer.end_token_id,
            pad_value=self.tokenizer.pad_token_id, sequence_length=self.encoder_sequence_length)
        self.decoder_packer = keras_hub.layers.StartEndPacker(
            start_value=self.target.start_token_id, end_value=self.target.end_token_id,
            pad_value=self.target.pad_token_id, sequence_length=self.decoder_sequence_length)
        self.encoder_packer.built = self.decoder_packer.built = True  # no weights; Keras' `quantize` walk asks
        self.built = True

    @staticmethod
    def _texts(x, y):
        """`(sources, targets)` from keras-hub's dict, a `(sources, targets)` pair, or `x=sources, y=targets`."""
        if isinstance(x, dict):
            return x["encoder_text"], x.get("decoder_text")
        if isinstance(x, (tuple, list)) and len(x) == 2 and y is None:
            return x[0], x[1]
        return x, y

    @property
    def multilingual(self):
        """Whether the tokenizers hold language codes to choose from (NLLB-200, M2M-100)."""
        return is_multilingual(self.target.inner)

    def language_ids(self, x, rows):
        """`(source ids, target ids)`, int32 `[rows]`: the language codes of a dict input `x` (a code or one per
        row), else `source_language` / `target_language`, else the tokenizer's defaults; `None` for a one-pair
        model. Python codes are checked here (an unknown one names the closest); string tensors in the graph."""
        if not self.multilingual:
            return None
        inner, given = self.target.inner, (x if isinstance(x, dict) else {})
        found = []
        for name, default in (("source_language", self.source_language or self.tokenizer.inner.source_language),
                              ("target_language", self.target_language or inner.target_language)):
            codes = given.get(name, default)
            codes = default if codes is None else codes
            if isinstance(codes, (list, tuple)):  # one per row
                found.append(tf.constant(language_ids(inner, codes, rows if isinstance(rows, int) else len(codes),
                                                      None, name)))
            elif codes is None or isinstance(codes, (str, bytes)):  # one for all (None: refused, naming codes)
                found.append(tf.fill([rows], tf.constant(language_ids(inner, codes, 1, None, name)[0])))
            else:
                table = self._language_table()
                ids = table.lookup(tf.broadcast_to(tf.convert_to_tensor(codes, tf.string), [rows]))
                tf.debugging.assert_non_negative(ids, message=f"{name}: unknown language code")
                found.append(ids)
        return tuple(found)

    def _language_table(self):
        table = self.__dict__.get("_languages")
        if table is None:
            inner = self.target.inner
            codes = list(inner.languages)
            table = self.__dict__["_languages"] = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
                codes, tf.constant([inner.language_id(code) for code in codes], tf.int32)), -1)
        return table

    def pack_sources(self, sources, sequence_length=None, source_ids=None):
        """Source strings -> int32 `[B, S]` encoder inputs (`source_ids`: each row's language code first)."""
        if not self.built:
            self.build(None)
        length = sequence_length or self.encoder_sequence_length
        if source_ids is None:
            return _trim(tf.cast(self.encoder_packer(self.tokenizer(sources), sequence_length=length), tf.int32))
        ids = tf.cast(self.tokenizer.inner.tokenize(sources), tf.int32)[:, : length - 2]
        ends = tf.fill([tf.shape(source_ids)[0], 1], tf.constant(self.tokenizer.end_token_id, tf.int32))
        packed = tf.concat([tf.cast(source_ids, tf.int32)[:, None], ids, ends], axis=1)
        return _trim(packed.to_tensor(0, shape=[None, length]))

    def _targets(self, targets, target_ids):
        """Target strings -> ragged int32 ids, each row's language code first where there is one."""
        if target_ids is None:
            return self.target(targets)
        ids = tf.cast(self.target.inner.tokenize(targets), tf.int32)
        return tf.concat([tf.cast(target_ids, tf.int32)[:, None], ids], axis=1)

    def call(self, x, y=None, sample_weight=None, *, encoder_sequence_length=None, decoder_sequence_length=None,
             sequence_length=None):
        if not self.built:
            self.build(None)
        sources, targets = self._texts(x, y)
        if targets is None:
            raise ValueError("TransformerSeq2SeqLMPreprocessor needs target texts to make labels: pass "
                             "{'encoder_text': ..., 'decoder_text': ...}, x=(sources, targets) or x=sources, "
                             "y=targets")
        length = (decoder_sequence_length or sequence_length or self.decoder_sequence_length) + 1
        languages = self.language_ids(x, _rows(sources)) or (None, None)
        packed = _trim(tf.cast(self.decoder_packer(self._targets(targets, languages[1]), sequence_length=length),
                               tf.int32))
        inputs = {"encoder_inputs": self.pack_sources(sources, encoder_sequence_length, languages[0]),
                  "decoder_inputs": packed[..., :-1]}
        labels = packed[..., 1:]
        weights = tf.cast(labels != 0, "float32")
        return keras.utils.pack_x_y_sample_weight(inputs, labels, weights)

    def generate_preprocess(self, x, *, encoder_sequence_length=None, decoder_sequence_length=None,
                            sequence_length=None):
        """Sources (and optional target prompts) -> `{"encoder_inputs", "decoder_token_ids",
        "decoder_padding_mask"}`: the prompt is `[START]` plus the prompt's tokens, 0-padded to one more than the
        decoder sequence length (`generate()` fills the positions after `[START]`).

        Called eagerly, it runs as one traced function per pair of lengths (a few dozen eager TensorFlow ops cost
        more than decoding a short sentence)."""
        if not self.built:
            self.build(None)
        sources, prompts = self._texts(x, None) if isinstance(x, dict) else (x, None)
        sources = tf.convert_to_tensor(sources, tf.string)
        prompts = tf.fill(tf.shape(sources), "") if prompts is None else tf.convert_to_tensor(prompts, tf.string)
        lengths = (encoder_sequence_length or self.encoder_sequence_length,
                   decoder_sequence_length or sequence_length or self.decoder_sequence_length)
        languages = self.language_ids(x, _rows(sources)) if sources.shape.rank == 1 else None
        languages = languages or (tf.zeros(tf.shape(sources)[:1], tf.int32),) * 2  # (unused for one pair)
        if not tf.executing_eagerly() or sources.shape.rank != 1:
            return self._generate_inputs(sources, prompts, *languages, *lengths)
        functions = self.__dict__.get("_generate_functions")
        if functions is None:
            functions = self.__dict__["_generate_functions"] = LRUCache()
        strings, ids = tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.int32)
        function = functions.get(lengths, lambda: tf.function(
            lambda a, b, c, d: self._generate_inputs(a, b, c, d, *lengths),
            input_signature=[strings, strings, ids, ids], autograph=False))
        return function(sources, prompts, *languages)

    def _generate_inputs(self, sources, prompts, source_ids, target_ids, encoder_length, decoder_length):
        # `[START]` plus at most `decoder_length` tokens: generation fills positions 1..decoder_length (a
        # multilingual model's first is the target language, forced).
        multilingual = self.multilingual
        prompt_ids = self.decoder_packer(self._targets(prompts, target_ids if multilingual else None),
                                         sequence_length=decoder_length + 1, add_end_value=False)
        prompt_ids = tf.cast(prompt_ids, tf.int32)
        return {"encoder_inputs": self.pack_sources(sources, encoder_length, source_ids if multilingual else None),
                "decoder_token_ids": prompt_ids, "decoder_padding_mask": prompt_ids != 0}

    def generate_postprocess(self, x):
        """`{"decoder_token_ids", "decoder_padding_mask"}` -> target strings (special tokens dropped)."""
        if not self.built:
            self.build(None)
        ids, mask = x["decoder_token_ids"], x["decoder_padding_mask"]
        if not tf.is_tensor(ids):
            ids, mask = keras.ops.convert_to_numpy(ids), keras.ops.convert_to_numpy(mask)
        ids, mask = tf.cast(ids, tf.int32), tf.cast(mask, tf.bool)
        if not tf.executing_eagerly():
            return self.target.inner.detokenize(tf.where(mask, ids, 0))
        function = self.__dict__.get("_postprocess_function")
        if function is None:
            function = self.__dict__["_postprocess_function"] = tf.function(
                lambda ids, mask: self.target.inner.detokenize(tf.where(mask, ids, 0)),
                input_signature=[tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None], tf.bool)],
                autograph=False)
        return [text.decode("utf-8") for text in function(ids, mask).numpy().tolist()]

    def get_config(self):
        config = super().get_config()
        config["encoder_sequence_length"] = self.encoder_sequence_length
        config["decoder_sequence_length"] = self.decoder_sequence_length
        config["target_tokenizer"] = (keras.layers.serialize(self.target_tokenizer)
                                      if self.target_tokenizer is not None else None)
        config.update(source_language=self.source_language, target_language=self.target_language)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("target_tokenizer"), dict):
            config["target_tokenizer"] = keras.layers.deserialize(config["target_tokenizer"])
        return super().from_config(config)
