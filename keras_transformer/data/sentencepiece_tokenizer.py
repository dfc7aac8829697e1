"""`SentencePieceTokenizer`: the tokenizer of OPUS-MT (Marian) checkpoints, run by tensorflow-text.

An OPUS-MT checkpoint in the Hugging Face layout has two SentencePiece models (`source.spm`, `target.spm`) and one
`vocab.json` that maps piece strings to the model's ids. Marian does not use the SentencePiece ids: it cuts the text
into pieces and looks each piece's string up in `vocab.json` (a piece that is not there is `<unk>`). A checkpoint
therefore needs two tokenizers, `from_marian("source.spm", "vocab.json")` and `from_marian("target.spm",
"vocab.json")`, that share one vocabulary.

Ids. Our models use `<pad>`=0 (the embedding masks id 0), `<unk>`=1, `[START]`=2 (the decoder's first token) and
`</s>`=3. Marian uses `</s>`=0, `<unk>`=1 and `<pad>`=the last id, for padding and as the decoder's first token. Our
vocabulary is `[<pad>, <unk>, [START], </s>]` followed by the other `vocab.json` tokens in Marian's id order, one
token more than Marian's: `original_ids[i]` is the Marian id behind our id `i` (both `<pad>` and `[START]` come from
Marian's `<pad>`, whose embedding row a converter copies into both), and `ids_from_original` maps back. Another
checkpoint's decoder may start from another token (M2M-100 and NLLB: `</s>`): `decoder_start_token` names it, and
`[START]` then takes that token's row (`keras_transformer.data.multilingual_tokenizer` holds their tokenizer).

Tokenizing and detokenizing are TensorFlow ops. With the `"fast"` engine they convert to TFLite with builtins plus
tensorflow-text's custom ops (`TFText>ByteSplitWithOffsets`, `TFText>ByteSplitByOffsets`,
`FastWordpieceTokenizeWithOffsets`, `TFText>FastSentencepieceTokenize`, `TFText>FastSentencepieceDetokenize`,
`RaggedTensorToTensor`, all registered by `tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS`). Tokenizing:

* a leading language code (`">>fra<< text"`: the text starts with `>>` and the code runs to the first `<<`) is cut
  off at byte offsets and looked up on its own (a one-word `FastWordpieceTokenizer` whose vocabulary is the
  `vocab.json` codes), as `MarianTokenizer` does; a code not in `vocab.json` is `<unk>`;
* the rest goes through the SentencePiece model, and a table maps SentencePiece ids to ours through the piece
  strings (a piece that `vocab.json` lacks, and an unknown piece, is `<unk>`);
* the two are joined with integer ops.

Detokenizing drops `<pad>`, `[START]`, `</s>` and `<unk>` (the special tokens that `MarianTokenizer.decode(ids,
skip_special_tokens=True)` drops) and whitespace-only pieces before the first and after the last other piece
(`decode` strips the text), then maps our ids to the pieces of a copy of the model that has three kinds of pieces
added: the `vocab.json` tokens that the model lacks (the other side's pieces, which `decode` writes as their text),
the pieces without their leading `"▁"` (for the first piece of a text) and a separator. TFLite's
`FastSentencepieceDetokenize` writes one string per call whatever the batch (its output keeps the shape it had when
the model was built; a second string crashes the interpreter), so all rows are decoded as one text, each row
followed by the separator (a control character that no piece holds), and cut apart at the separator's bytes.

What differs from `transformers`' `MarianTokenizer` (a few rare inputs, each checked by the tests) is listed in
docs/pretrained.md.
"""

import os

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from keras_transformer.data.marian_vocabulary import permute_vocabulary
from keras_transformer.data.marian_vocabulary import read_json
from keras_transformer.data.marian_vocabulary import read_vocab_json
from keras_transformer.data.sentencepiece_model import CONTROL
from keras_transformer.data.sentencepiece_model import SPACE_SYMBOL  # noqa: F401 - re-exported
from keras_transformer.data.sentencepiece_model import UNKNOWN
from keras_transformer.data.sentencepiece_model import detokenization_tables
from keras_transformer.data.sentencepiece_model import read_model
from keras_transformer.data.sentencepiece_model import reasons_against_fast
from keras_transformer.data.sentencepiece_resource import standard_sentencepiece_tokenizer
from keras_transformer.data.tokenizer_base import CONFIG_FILE
from keras_transformer.data.tokenizer_base import Tokenizer
from keras_transformer.data.tokenizer_base import write_json

_VOCAB_FILE = "vocab.json"
_MODEL_FILE = "sentencepiece.spm"
_FORMAT = "keras_transformer.SentencePieceTokenizer"
START_TOKEN = "[START]"
ENGINES = ("auto", "fast", "standard")



class SentencePieceTokenizer(Tokenizer):
    """The tokenizer of an OPUS-MT (Marian) checkpoint: one SentencePiece model and the checkpoint's vocabulary.

    Ids are `int32`: `<pad>`=0, `<unk>`=1, `[START]`=2, `</s>`=3, then the other `vocab.json` tokens in Marian's
    order (see the module docstring for the mapping to Marian's ids). `tokenize` and `detokenize` are pure
    TensorFlow, so they work inside a `tf.function` and a SavedModel; with the `"fast"` engine they also convert
    to TFLite with `TFLITE_BUILTINS` plus tensorflow-text's custom ops. Sources are `pieces + </s>`, with no start
    token (`source_start_id` is `None`).

    Args:
        model_proto: the serialized SentencePiece model (the bytes of a `.spm` file).
        original_vocab: Marian's vocabulary, a mapping of token to Marian id (the contents of `vocab.json`); the
            ids must be `0 .. len - 1`, each once.
        pad_token: Marian's padding token (also its decoder's first token).
        unk_token: Marian's unknown token.
        eos_token: Marian's end-of-sequence token.
        decoder_start_token: the checkpoint token that its decoder starts from, whose id `[START]` takes in
            `original_ids`; `None` is `pad_token` (Marian's).
        engine: `"fast"` runs `tensorflow_text.FastSentencepieceTokenizer`, the only one that converts to TFLite,
            for unigram models whose pieces are normal, unknown or control ones (no byte fallback, user-defined or
            unused pieces, no whitespace-as-suffix, no denormalizer: OPUS-MT's models); `"standard"` runs
            `tensorflow_text.SentencepieceTokenizer` (any model, no TFLite); `"auto"` picks `"fast"` where the
            model allows it. `engine` holds the choice. The standard engine keeps its model in TensorFlow's kernel
            cache, which resetting Keras' global state empties: build the tokenizer again after that.

    Example (`checkpoint_dir` holds an OPUS-MT checkpoint in the Hugging Face layout):

    >>> import os
    >>> source = SentencePieceTokenizer.from_marian(os.path.join(checkpoint_dir, "source.spm"),
    ...                                             os.path.join(checkpoint_dir, "vocab.json"))
    >>> target = SentencePieceTokenizer.from_marian(os.path.join(checkpoint_dir, "target.spm"),
    ...                                             os.path.join(checkpoint_dir, "vocab.json"))
    >>> ids = source.tokenize(["Der Hund läuft."])  # our ids, without </s>
    >>> source.start_id, source.end_id, source.source_start_id is None
    (2, 3, True)
    >>> target.detokenize(target.tokenize(["the dog runs."])).numpy()
    array([b'the dog runs.'], dtype=object)

    References:
        Kudo and Richardson, 2018, "SentencePiece: A simple and language independent subword tokenizer and
        detokenizer for Neural Text Processing" (https://arxiv.org/abs/1808.06226); Tiedemann and Thottingal, 2020,
        "OPUS-MT - Building open translation services for the World" (https://aclanthology.org/2020.eamt-1.61).
    """

    format_name = _FORMAT  # the "format" of the saved tokenizer.json

    def __init__(self, model_proto, original_vocab, pad_token="<pad>", unk_token="<unk>", eos_token="</s>",
                 engine="auto", decoder_start_token=None):
        super().__init__(name="sentencepiece_tokenizer")
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
        self._model_proto = bytes(model_proto)
        self.pad_token, self.unk_token, self.eos_token = str(pad_token), str(unk_token), str(eos_token)
        self.decoder_start_token = self.pad_token if decoder_start_token is None else str(decoder_start_token)
        pieces, types, model_type = read_model(self._model_proto)

        # The vocabulary: ours is Marian's with its three special tokens moved to the front and [START] added.
        self._vocab, self._original_vocab, self._original_ids, self._ids_from_original = permute_vocabulary(
            original_vocab, self.pad_token, self.unk_token, self.eos_token, START_TOKEN, self.decoder_start_token)
        self._index = {token: i for i, token in enumerate(self._vocab)}

        # Tokenizing: SentencePiece id -> our id, through the piece strings (Marian's own lookup).
        ids_from_sp = np.full(len(pieces), self.unk_id, dtype=np.int32)
        for sp_id, (piece, kind) in enumerate(zip(pieces, types)):
            if kind not in (UNKNOWN, CONTROL):
                ids_from_sp[sp_id] = self._index.get(piece, self.unk_id)
        # Language codes: the vocabulary's ">>xx<<" tokens, found by a one-word FastWordpiece lookup.
        codes = [token for token in self._vocab if _is_language_code(token)]
        self._code_ids = tf.constant([self.unk_id] + [self._index[code] for code in codes], tf.int32)
        self._code_lookup = tf_text.FastWordpieceTokenizer(
            vocab=[self.unk_token] + codes, suffix_indicator="##",
            max_bytes_per_word=max([len(code.encode("utf-8")) for code in codes], default=4), token_out_type=tf.int32,
            unknown_token=self.unk_token, no_pretokenization=True, support_detokenization=False)
        self._bytes = tf_text.ByteSplitter()

        # Detokenizing: our id -> piece of a copy of the model that also has the vocabulary's missing tokens, the
        # pieces without their leading "▁" (for the first piece of a text) and a separator piece.
        tables = self._detokenization_tables(pieces, types)
        special, blank, sp_from_ids, first_sp_from_ids, self._separator, self._separator_id, appended = tables
        self._ids_from_sp = tf.constant(ids_from_sp, tf.int32)
        self._sp_from_ids = tf.constant(sp_from_ids, tf.int32)
        self._first_sp_from_ids = tf.constant(first_sp_from_ids, tf.int32)
        self._special_ids = tf.constant(special.astype(np.int32))
        self._blank_ids = tf.constant(blank.astype(np.int32))

        not_fast = reasons_against_fast(self._model_proto, types, model_type)
        if engine == "fast" and not_fast:
            raise ValueError(f"engine='fast' cannot run this model: it {' and '.join(not_fast)} (use engine='standard' "
                             "or 'auto')")
        self.engine = ("standard" if not_fast else "fast") if engine == "auto" else engine
        detok_proto = self._model_proto + appended
        if self.engine == "fast":
            self._sp = tf_text.FastSentencepieceTokenizer(self._model_proto)
            self._detokenizer = tf_text.FastSentencepieceTokenizer(detok_proto)
        else:
            # The model resource is named after the node that makes it: in a SavedModel two tokenizers with the
            # same node name share one model. Named after the model's bytes, only equal models share.
            self._sp = standard_sentencepiece_tokenizer(self._model_proto)
            self._detokenizer = standard_sentencepiece_tokenizer(detok_proto)

    def _detokenization_tables(self, pieces, types):
        """What `detokenize` needs (see `detokenization_tables`); a subclass may drop more tokens or add pieces."""
        return detokenization_tables(pieces, types, self._vocab)

    # ----------------------------------------------------------------------------------------------------------
    # Properties.

    @property
    def source_start_id(self):
        """The id that starts a source sequence: `None`, Marian's sources are `pieces + </s>`."""
        return None

    @property
    def original_ids(self):
        """`int32` NumPy array `[vocab_size]`: the Marian id behind each of our ids (`[START]` -> the id of
        `decoder_start_token`, Marian's pad)."""
        return self._original_ids.copy()

    @property
    def ids_from_original(self):
        """`int32` NumPy array `[original_vocab_size]`: our id for each Marian id (never `[START]`: Marian's pad
        -> our `<pad>`)."""
        return self._ids_from_original.copy()

    @property
    def original_vocab_size(self):
        """Marian's vocabulary size (`vocab.json`)."""
        return len(self._original_vocab)

    @property
    def model_proto(self):
        """The serialized SentencePiece model."""
        return self._model_proto

    def from_original_ids(self, original_ids):
        """Maps Marian ids (any shape, NumPy or nested lists) to ours; returns an `int32` NumPy array."""
        return self._ids_from_original[np.asarray(original_ids, dtype=np.int64)]

    # ----------------------------------------------------------------------------------------------------------
    # TensorFlow ops.

    def tokenize(self, strings):
        """Tokenizes a batch of strings as `MarianTokenizer` does (see the module docstring for the differences).

        Args:
            strings: `tf.string` `[B]` (or a list of Python strings).

        Returns:
            `tf.RaggedTensor` of `int32` ids, `[B, None]`, without `</s>`.
        """
        strings = tf.convert_to_tensor(strings, tf.string)
        if strings.shape.rank == 0:
            return self.tokenize(tf.expand_dims(strings, 0))[0]
        codes, texts = self._split_language_codes(strings)
        code_pieces = self._code_lookup.tokenize(codes)  # [B, 0 or 1]
        has_code = tf.equal(tf.cast(code_pieces.row_lengths(), tf.int32), 1)
        code_ids = tf.gather(self._code_ids, code_pieces.to_tensor(default_value=0, shape=[None, 1]))
        pieces = self._sp.tokenize(texts)
        text_lengths = tf.cast(pieces.row_lengths(), tf.int32)
        text_ids = tf.gather(self._ids_from_sp, pieces.to_tensor(default_value=0))
        ids = tf.concat([code_ids, text_ids], axis=1)
        keep = tf.concat(
            [tf.expand_dims(has_code, 1), tf.sequence_mask(text_lengths, tf.shape(text_ids)[1])], axis=1)
        lengths = tf.cast(tf.cast(has_code, tf.int32) + text_lengths, tf.int64)  # int64 splits, as tensorflow-text's
        return tf.RaggedTensor.from_row_lengths(tf.boolean_mask(ids, keep), lengths, validate=False)

    def _split_language_codes(self, strings):
        """`(codes, texts)`: a leading `>>...<<` of each string (or `""`) and the rest, by byte offsets."""
        split = self._bytes.split(strings)
        lengths = tf.cast(split.row_lengths(), tf.int32)
        # RaggedTensorToTensor in TFLite takes int32 values, not uint8; two zero bytes keep [:, 1] in range.
        chars = tf.pad(split.with_flat_values(tf.cast(split.flat_values, tf.int32)).to_tensor(), [[0, 0], [0, 2]])
        opens = tf.logical_and(tf.equal(chars[:, 0], ord(">")), tf.equal(chars[:, 1], ord(">")))
        less = tf.equal(chars, ord("<"))
        closes = tf.logical_and(less[:, :-1], less[:, 1:])
        first_close = tf.cast(tf.argmax(tf.cast(closes, tf.int32), axis=1), tf.int32)
        code_end = tf.where(tf.logical_and(opens, tf.reduce_any(closes, axis=1)), first_close + 2, 0)
        starts = tf.stack([tf.zeros_like(code_end), code_end], axis=1)
        ends = tf.stack([code_end, lengths], axis=1)
        parts = tf.reshape(self._bytes.split_by_offsets(strings, starts, ends).flat_values, [-1, 2])
        return parts[:, 0], parts[:, 1]

    def detokenize(self, ids):
        """Turns ids back into text, as `MarianTokenizer.decode(ids, skip_special_tokens=True)` does.

        `<pad>`, `[START]`, `</s>` and `<unk>` are dropped wherever they are, and so are whitespace-only pieces
        before the first and after the last other piece. Only integer ops, the SentencePiece detokenizer and byte
        splitting are used, so with the `"fast"` engine this converts to TFLite without Flex ops.

        Args:
            ids: integer ids, a dense `[B, L]` tensor (e.g. 0-padded decoder output, static shape allowed), a
                `tf.RaggedTensor` `[B, None]`, or one sequence `[L]`.

        Returns:
            `tf.string` `[B]` (a scalar for a rank-1 input).
        """
        ids = self._dense_ids(ids)
        if ids.shape.rank == 1:
            return self.detokenize(tf.expand_dims(ids, 0))[0]
        kept = 1 - tf.gather(self._special_ids, ids)
        content = kept * (1 - tf.gather(self._blank_ids, ids))
        content_before = tf.cumsum(content, axis=1)  # content tokens up to here, inclusive
        content_after = tf.cumsum(content, axis=1, reverse=True)
        keep = tf.logical_and(tf.greater(kept, 0),
                              tf.logical_and(tf.greater(content_before, 0), tf.greater(content_after, 0)))
        # The first piece of a text loses its leading "▁" (SentencePiece's dummy prefix).
        first = tf.logical_and(tf.greater(content, 0), tf.equal(content_before, 1))
        pieces = tf.where(first, tf.gather(self._first_sp_from_ids, ids), tf.gather(self._sp_from_ids, ids))
        # TFLite's FastSentencepieceDetokenize gives one string per call (it keeps its output's shape), so the rows
        # are decoded as one text, each followed by the separator, and cut apart at the separator's bytes.
        rows = tf.shape(ids)[0]
        pieces = tf.concat([pieces, tf.fill([rows, 1], self._separator_id)], axis=1)
        keep = tf.concat([keep, tf.fill([rows, 1], True)], axis=1)
        values = tf.boolean_mask(pieces, keep)
        row_splits = tf.stack([0, tf.size(values)])
        joined = self._detokenizer.detokenize(tf.RaggedTensor.from_row_splits(values, row_splits, validate=False))
        data = tf.cast(self._bytes.split(joined).flat_values, tf.int32)
        ends = tf.cast(tf.reshape(tf.where(tf.equal(data, self._separator)), [-1]), tf.int32)
        starts = tf.concat([tf.zeros([1], tf.int32), ends + 1], axis=0)[:-1]
        texts = self._bytes.split_by_offsets(joined, tf.expand_dims(starts, 0), tf.expand_dims(ends, 0))
        return tf.reshape(texts.flat_values, [-1])

    # ----------------------------------------------------------------------------------------------------------
    # Reading and saving.

    @classmethod
    def from_marian(cls, spm_path, vocab_path, pad_token="<pad>", unk_token="<unk>", eos_token="</s>",
                    engine="auto"):
        """Reads the tokenizer of one side of an OPUS-MT checkpoint in the Hugging Face layout.

        Args:
            spm_path: `source.spm` (for the encoder's input) or `target.spm` (for the decoder's).
            vocab_path: the checkpoint's `vocab.json` (token -> Marian id).
            pad_token: Marian's padding token, as in `MarianTokenizer`.
            unk_token: Marian's unknown token, as in `MarianTokenizer`.
            eos_token: Marian's end-of-sentence token, as in `MarianTokenizer`.
            engine: see the class docstring.

        Raises:
            ValueError: naming the file that does not hold what is expected (as a `vocab.json` with `[START]`).
        """
        spm_path, vocab_path = os.fspath(spm_path), os.fspath(vocab_path)
        for path in (spm_path, vocab_path):
            if not os.path.exists(path):
                raise FileNotFoundError(f"{path}: not found")
        original_vocab = read_vocab_json(vocab_path)
        with open(spm_path, "rb") as f:
            model_proto = f.read()
        return cls._build(model_proto, original_vocab, spm_path, vocab_path, pad_token=pad_token,
                          unk_token=unk_token, eos_token=eos_token, engine=engine)

    @classmethod
    def _build(cls, model_proto, original_vocab, spm_path, vocab_path, **kwargs):
        """The constructor, with errors that name the file they come from."""
        try:
            read_model(model_proto)
        except ValueError as error:
            raise ValueError(f"{spm_path}: expected a SentencePiece model ({error})") from None
        names = [name for name in ("pad_token", "unk_token", "eos_token", "decoder_start_token") if kwargs.get(name)]
        missing = [kwargs[name] for name in names if kwargs[name] not in original_vocab]
        if missing:
            raise ValueError(f"{vocab_path}: expected the special tokens {missing} ({', '.join(names)})")
        if START_TOKEN in original_vocab:
            raise ValueError(f"{vocab_path}: already has {START_TOKEN!r} (id {original_vocab[START_TOKEN]}), the "
                             "start token this tokenizer adds; expected a checkpoint's vocabulary without it")
        try:
            return cls(model_proto, original_vocab, **kwargs)
        except (ValueError, tf.errors.OpError) as error:
            raise ValueError(f"{spm_path}: could not load the SentencePiece model with {vocab_path} ({error})") \
                from None

    def get_config(self):
        return {
            "format": self.format_name,
            "version": 1,
            "vocab_size": self.vocab_size,
            "original_vocab_size": self.original_vocab_size,
            "pad_token": self.pad_token,
            "unk_token": self.unk_token,
            "eos_token": self.eos_token,
            "start_token": START_TOKEN,
            "decoder_start_token": self.decoder_start_token,
            "engine": self.engine,
        }

    def save(self, directory):
        """Writes `sentencepiece.spm` (the model), `vocab.json` (Marian's vocabulary, as in the checkpoint) and
        `tokenizer.json` (settings) into `directory`."""
        self._write_config(directory)
        with open(os.path.join(directory, _MODEL_FILE), "wb") as f:
            f.write(self._model_proto)
        write_json(os.path.join(directory, _VOCAB_FILE), {token: i for i, token in enumerate(self._original_vocab)},
                   indent=0)

    @classmethod
    def load(cls, directory):
        """Loads a tokenizer written by `save`.

        Raises:
            ValueError: naming the file (and line) when a file is missing or does not match the format.
        """
        config_path = os.path.join(directory, CONFIG_FILE)
        vocab_path = os.path.join(directory, _VOCAB_FILE)
        model_path = os.path.join(directory, _MODEL_FILE)
        for path in (config_path, vocab_path, model_path):
            if not os.path.exists(path):
                raise FileNotFoundError(f"{path}: not found; expected a tokenizer saved by {cls.__name__}.save")
        config = read_json(config_path, "a JSON object")
        if not isinstance(config, dict):
            raise ValueError(f"{config_path}:1: expected a JSON object")
        if config.get("format") != cls.format_name:
            raise ValueError(f"{config_path}:1: expected \"format\": \"{cls.format_name}\", got "
                             f"{config.get('format')!r}")
        for key in ("vocab_size", "original_vocab_size"):
            if not isinstance(config.get(key), int):
                raise ValueError(f"{config_path}:1: expected an integer {key!r}")
        for key in ("pad_token", "unk_token", "eos_token", "engine", "decoder_start_token"):
            if not isinstance(config.get(key), str) and (key != "decoder_start_token" or key in config):
                raise ValueError(f"{config_path}:1: expected a string {key!r}")
        if config["engine"] not in ENGINES:
            raise ValueError(f"{config_path}:1: expected an \"engine\" in {ENGINES}, got {config['engine']!r}")
        original_vocab = read_vocab_json(vocab_path)
        if len(original_vocab) != config["original_vocab_size"]:
            raise ValueError(f"{vocab_path}: expected {config['original_vocab_size']} tokens as {config_path} says, "
                             f"found {len(original_vocab)}")
        with open(model_path, "rb") as f:
            model_proto = f.read()
        tokenizer = cls._build(model_proto, original_vocab, model_path, vocab_path,
                               **cls._arguments_from_config(config, config_path))
        if tokenizer.vocab_size != config["vocab_size"]:
            raise ValueError(f"{config_path}:1: expected \"vocab_size\": {tokenizer.vocab_size} for {vocab_path}, "
                             f"got {config['vocab_size']}")
        return tokenizer

    @classmethod
    def _arguments_from_config(cls, config, config_path):
        """The constructor's keyword arguments from a checked saved config (files without "decoder_start_token",
        written before it existed, start from the pad token)."""
        names = ("pad_token", "unk_token", "eos_token", "engine", "decoder_start_token")
        return {name: config[name] for name in names if name in config}

    def __repr__(self):
        return f"SentencePieceTokenizer(vocab_size={self.vocab_size}, engine={self.engine!r})"


# --------------------------------------------------------------------------------------------------------------
# Helpers.


def _is_language_code(token):
    """Whether `token` can be the code `MarianTokenizer` cuts off: `>>`, then anything, then the first `<<`."""
    return token.startswith(">>") and token.find("<<") == len(token) - 2 >= 2
