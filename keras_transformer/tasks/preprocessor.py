"""`TransformerSeq2SeqLMPreprocessor`: raw (source, target) strings -> the backbone's inputs, keras-hub's way.

A keras-hub `Seq2SeqLMPreprocessor` whose packing is keras-hub's `StartEndPacker`, set to the package's layout:

* sources: `[START] ids[:n - 2] [END]` (no `[START]` for tokenizers whose sources carry none, such as Marian's);
* decoder inputs: `[START] ids`, labels: `ids [END]`, sample weights: 1 where a label is not padding;
* 0-padded, to the longest row of the batch rounded up to a multiple of 16 (at most the sequence length), so a
  batch of short sentences does not run at the longest length the model allows and compiled steps see few shapes.

Inputs may be keras-hub's `{"encoder_text": ..., "decoder_text": ...}`, a `(sources, targets)` pair as `x`, or
`x=sources, y=targets`. The outputs are `({"encoder_inputs", "decoder_inputs"}, labels, sample_weight)`, what the
backbone (`build_transformer`'s graph) takes. Separate source and target vocabularies have one tokenizer each
(`tokenizer` and `target_tokenizer`); a shared one leaves `target_tokenizer` `None`.
"""

import keras
import keras_hub
import tensorflow as tf

from keras_transformer.models.backbone import TransformerBackbone
from keras_transformer.tasks.tokenizer import TransformerTokenizer

PAD_MULTIPLE = 16


def _trim(ids, multiple=PAD_MULTIPLE):
    """Drops the all-padding columns of 0-padded `[B, L]` ids beyond the longest row, rounded up to `multiple`."""
    longest = tf.reduce_max(tf.concat([tf.reduce_sum(tf.cast(ids != 0, tf.int32), axis=1), [1]], axis=0))
    width = tf.minimum(tf.shape(ids)[1], (longest + multiple - 1) // multiple * multiple)
    return ids[:, :width]


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerSeq2SeqLMPreprocessor(keras_hub.models.Seq2SeqLMPreprocessor):
    """Tokenizes and packs translation pairs for `TransformerSeq2SeqLM` (see the module docstring).

    Args:
        tokenizer: the source side's `TransformerTokenizer` (also the target's when the vocabulary is shared).
        target_tokenizer: the target side's `TransformerTokenizer`, or `None` for a shared vocabulary.
        encoder_sequence_length: the longest packed source (`[START]` and `[END]` included); longer ones are cut.
        decoder_sequence_length: the longest decoder input (`[START]` included) in training, and the most tokens
            `generate()` produces (its `max_length`).

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
                 **kwargs):
        super().__init__(tokenizer, encoder_sequence_length=encoder_sequence_length,
                         decoder_sequence_length=decoder_sequence_length, **kwargs)
        self.target_tokenizer = target_tokenizer

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

    def pack_sources(self, sources, sequence_length=None):
        """Source strings -> int32 `[B, S]` encoder inputs."""
        if not self.built:
            self.build(None)
        ids = self.encoder_packer(self.tokenizer(sources),
                                  sequence_length=sequence_length or self.encoder_sequence_length)
        return _trim(tf.cast(ids, tf.int32))

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
        packed = _trim(tf.cast(self.decoder_packer(self.target(targets), sequence_length=length), tf.int32))
        inputs = {"encoder_inputs": self.pack_sources(sources, encoder_sequence_length),
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
        if not tf.executing_eagerly() or sources.shape.rank != 1:
            return self._generate_inputs(sources, prompts, *lengths)
        functions = self.__dict__.setdefault("_generate_functions", {})
        if lengths not in functions:
            spec = tf.TensorSpec([None], tf.string)
            functions[lengths] = tf.function(lambda a, b: self._generate_inputs(a, b, *lengths),
                                             input_signature=[spec, spec])
        return functions[lengths](sources, prompts)

    def _generate_inputs(self, sources, prompts, encoder_length, decoder_length):
        # `[START]` plus at most `decoder_length` tokens: generation fills positions 1..decoder_length.
        prompt_ids = self.decoder_packer(self.target(prompts), sequence_length=decoder_length + 1,
                                         add_end_value=False)
        prompt_ids = tf.cast(prompt_ids, tf.int32)
        return {"encoder_inputs": self.pack_sources(sources, encoder_length),
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
                input_signature=[tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None], tf.bool)])
        return [text.decode("utf-8") for text in function(ids, mask).numpy().tolist()]

    def get_config(self):
        config = super().get_config()
        config["encoder_sequence_length"] = self.encoder_sequence_length
        config["decoder_sequence_length"] = self.decoder_sequence_length
        config["target_tokenizer"] = (keras.layers.serialize(self.target_tokenizer)
                                      if self.target_tokenizer is not None else None)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("target_tokenizer"), dict):
            config["target_tokenizer"] = keras.layers.deserialize(config["target_tokenizer"])
        return super().from_config(config)
