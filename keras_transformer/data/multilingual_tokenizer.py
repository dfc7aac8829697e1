"""`MultilingualTokenizer`: the tokenizer of M2M-100 and NLLB-200 checkpoints, run by tensorflow-text.

Both checkpoint families (`config.json` `model_type` `"m2m_100"`) cut text with one SentencePiece BPE model
(`sentencepiece.bpe.model`) and give the pieces fairseq's ids: `<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3, then the
pieces. One vocabulary serves both sides, and language codes pick the languages:

* NLLB-200 (`tokenizer.json` beside the model, transformers' `NllbTokenizer`): the pieces' ids are in
  `tokenizer.json`'s `"model"` `"vocab"` (a piece's SentencePiece id + 1), and the language codes (`"deu_Latn"`)
  and `<mask>` are its special `"added_tokens"`, whose ids are read there (they differ between checkpoints).
* M2M-100 (`vocab.json` beside the model, transformers' `M2M100Tokenizer`): `vocab.json` maps piece strings to
  ids, as Marian's does; the language tokens (`"__de__"`, code `"de"`), listed as additional special tokens in
  `tokenizer_config.json` or `special_tokens_map.json`, follow the vocabulary in that order.

(`keras_transformer.data.multilingual_files` reads those files.)

A source is `[source language] pieces </s>` (`source_start_id` is the source language's id, so the package's one
packer lays it out); the decoder starts from `</s>` and the target language's code is its first generated token,
forced. A piece string that the vocabulary lacks is `<unk>`.

Ids. Ours are `<pad>` 0, `<unk>` 1, `[START]` 2, `</s>` 3, then the checkpoint's other tokens in its id order
(`keras_transformer.data.marian_vocabulary.permute_vocabulary`); `original_ids[i]` is the checkpoint id behind our id
`i`, and `[START]` takes the checkpoint's `</s>` id, the token its decoder starts from.

Tokenizing and detokenizing are TensorFlow ops (a `tf.function`, a SavedModel); a BPE model runs on
`tensorflow_text.SentencepieceTokenizer`, which TFLite lacks (`FastSentencepieceTokenizer` reads unigram models
only: given a BPE model it segments words differently). `style` follows the transformers class of the checkpoint:

* `"nllb"`, as transformers' `NllbTokenizer` (a `tokenizers`-library tokenizer) does: SentencePiece's pieces, and
  one more `"▁"` piece when the text, normalized, ends with whitespace (SentencePiece strips it; `NllbTokenizer`
  keeps one space, as a word of its own). The text is found to end so by SentencePiece itself: with a letter `c`
  of the model, `c + text + c` has one word more than `c + text` exactly then. `detokenize` is `decode(ids,
  skip_special_tokens=True)`: the special tokens dropped, the first remaining piece loses every `"▁"`, the others
  write theirs as spaces, nothing stripped.
* `"m2m_100"`, as `M2M100Tokenizer` does: SentencePiece's pieces; `detokenize` is SentencePiece's text of the
  remaining pieces, stripped (the `SentencePieceTokenizer` rules).

`detokenize` drops `<pad>`, `[START]`, `</s>`, `<unk>`, `<s>`, `<mask>`, the language codes and every other special
token of the checkpoint, as `decode(ids, skip_special_tokens=True)` does. What differs from transformers' tokenizers:
the literal text of a special token or of a language code in the input (`"deu_Latn"`, `"<mask>"`, `"</s>"`) is text
here, where transformers splits it off as that token; the `SentencePieceTokenizer` differences of the `"m2m_100"`
detokenizer (a last piece's own trailing `"▁"` is kept). Checkpoints with `legacy_behaviour` (NLLB sources `X </s>
[source language]`) are refused.

Example (`checkpoint_dir` holds an NLLB-200 checkpoint in the Hugging Face layout):

>>> tokenizer = MultilingualTokenizer.from_checkpoint(checkpoint_dir)
>>> german = tokenizer.with_source_language("deu_Latn")
>>> from keras_transformer.data.packing import pack_rows
>>> sources = pack_rows(german.tokenize(["Der Hund läuft."]).to_list(), german.source_start_id, german.end_id, 64)
>>> german.tokens(sources[0])[0], german.tokens(sources[0])[-1]
('deu_Latn', '</s>')
>>> generated = [tokenizer.language_id("eng_Latn")] + tokenizer.tokenize("the dog").numpy().tolist()
>>> tokenizer.detokenize(generated).numpy()  # as transformers' decode(..., skip_special_tokens=True)
b'the dog'
"""

import copy
import difflib
import os
import unicodedata

import numpy as np
import tensorflow as tf

from keras_transformer.data.multilingual_files import NO_CODES
from keras_transformer.data.multilingual_files import checkpoint_style
from keras_transformer.data.multilingual_files import read_m2m100_files
from keras_transformer.data.multilingual_files import read_nllb_files
from keras_transformer.data.sentencepiece_model import BYTE
from keras_transformer.data.sentencepiece_model import CONTROL
from keras_transformer.data.sentencepiece_model import NORMAL
from keras_transformer.data.sentencepiece_model import SPACE_SYMBOL
from keras_transformer.data.sentencepiece_model import UNKNOWN
from keras_transformer.data.sentencepiece_model import DetokenizerModel
from keras_transformer.data.sentencepiece_model import detokenization_tables
from keras_transformer.data.sentencepiece_tokenizer import SentencePieceTokenizer

_FORMAT = "keras_transformer.MultilingualTokenizer"
STYLES = ("nllb", "m2m_100")
# The source language transformers' tokenizers take when none is given.
_DEFAULT_SOURCE = {"nllb": "eng_Latn", "m2m_100": "en"}


class MultilingualTokenizer(SentencePieceTokenizer):
    """The tokenizer of an M2M-100 or NLLB-200 checkpoint: its SentencePiece BPE model, vocabulary and language codes.

    One tokenizer serves the encoder and the decoder. Ids are `int32`: `<pad>`=0, `<unk>`=1, `[START]`=2, `</s>`=3,
    then the checkpoint's other tokens (language codes included) in its id order; `original_ids` maps ours to the
    checkpoint's. Sources are `[source language] pieces </s>`: `source_start_id` is the id of `source_language`, so
    `pack_rows(rows, tokenizer.source_start_id, tokenizer.end_id, max_length)` lays them out; `with_source_language`
    gives the same tokenizer with another default. A translation's first generated token is the target language's
    id (`language_id(target_language)`), forced; `detokenize` drops it with the other special tokens.

    Build one with `from_checkpoint(directory)` (or `from_nllb` / `from_m2m100`); `save` and `load` keep it, and
    `keras_transformer.data.tokenizers.load_tokenizer` knows its format.

    Args:
        model_proto: the serialized SentencePiece model (`sentencepiece.bpe.model`).
        original_vocab: the checkpoint's tokens, a mapping of token -> checkpoint id (ids `0 .. len - 1`, each once),
            language tokens and other added tokens included.
        languages: the language codes, a mapping of code -> its token in `original_vocab` (M2M-100: `"de"` ->
            `"__de__"`), or a sequence of codes that are their own tokens (NLLB: `"deu_Latn"`). Not empty.
        source_language: the default source language (a code); `None` is transformers' default (`"eng_Latn"`,
            `"en"`) where the checkpoint has it, else the first code.
        target_language: the default target language (a code), or `None`.
        special_tokens: more tokens that `detokenize` drops (the checkpoint's special tokens: `<s>`, `<mask>`).
        style: `"nllb"` or `"m2m_100"`, the transformers tokenizer whose ids and text this one gives (see the
            module docstring).
        pad_token, unk_token, eos_token: the checkpoint's special tokens.
        decoder_start_token: the token the checkpoint's decoder starts from (`</s>`).
        engine: as `SentencePieceTokenizer`'s (`"auto"` takes `"standard"` for a BPE model).

    Raises:
        ValueError: no language codes, a code whose token is not in the vocabulary, an unknown default language.

    Example (`checkpoint_dir` holds an NLLB-200 checkpoint in the Hugging Face layout):

    >>> tokenizer = MultilingualTokenizer.from_checkpoint(checkpoint_dir)
    >>> tokenizer.languages[:2], tokenizer.source_language
    (('ace_Arab', 'ace_Latn'), 'eng_Latn')
    >>> ids = tokenizer.tokenize(["The dog runs."])  # our ids, without the language code and </s>
    >>> tokenizer.detokenize(ids).numpy()
    array([b'The dog runs.'], dtype=object)
    """

    format_name = _FORMAT

    def __init__(self, model_proto, original_vocab, languages, source_language=None, target_language=None,
                 special_tokens=(), style="nllb", pad_token="<pad>", unk_token="<unk>", eos_token="</s>",
                 decoder_start_token="</s>", engine="auto"):
        if style not in STYLES:
            raise ValueError(f"style must be one of {STYLES}, got {style!r}")
        if not isinstance(languages, dict):
            languages = {str(code): str(code) for code in languages}
        if not languages:
            raise ValueError(NO_CODES)
        missing = [token for token in languages.values() if token not in original_vocab]
        if missing:
            raise ValueError(f"the language tokens {missing[:4]} are not in the vocabulary")
        # Set before SentencePieceTokenizer.__init__, which calls `_detokenization_tables`.
        self._languages = {str(code): str(token) for code, token in languages.items()}
        self._style = style
        self._special_tokens = tuple(str(token) for token in special_tokens if token in original_vocab)
        super().__init__(model_proto, original_vocab, pad_token=pad_token, unk_token=unk_token,
                         eos_token=eos_token, engine=engine, decoder_start_token=decoder_start_token)
        if source_language is None:
            default = _DEFAULT_SOURCE[style]
            source_language = default if default in self._languages else next(iter(self._languages))
        self._check_code(source_language)
        if target_language is not None:
            self._check_code(target_language)
        self._source_language, self._target_language = str(source_language), target_language
        self._space_id = self.token_to_id(SPACE_SYMBOL)

    def _detokenization_tables(self, pieces, types):
        # (Called by SentencePieceTokenizer.__init__ with the model's pieces.) The "nllb" style's test of whether a
        # text ends with whitespace counts words: the "▁" of each SentencePiece id, and a letter to probe with.
        spaces = [piece.count(SPACE_SYMBOL) if kind not in (UNKNOWN, CONTROL, BYTE) else 0
                  for piece, kind in zip(pieces, types)]
        self._spaces = tf.constant(np.array(spaces, dtype=np.int32))
        self._probe = _probe_letter(pieces, types)
        if self._style == "m2m_100":
            tables = detokenization_tables(pieces, types, self._vocab)
            tables[0][self._dropped_ids()] = True
            return tables
        # "nllb": the first remaining piece loses every "▁" (a copy of the piece without them, added where the model
        # lacks it; nothing where that leaves nothing), the others keep theirs.
        detok = DetokenizerModel(pieces, types)
        size = len(self._vocab)
        special = np.zeros(size, dtype=bool)
        special[:4] = True
        special[self._dropped_ids()] = True
        sp_from_ids = np.zeros(size, dtype=np.int32)
        first_sp_from_ids = np.zeros(size, dtype=np.int32)
        first_empty = np.zeros(size, dtype=bool)
        for i, token in enumerate(self._vocab):
            if special[i] or not token:
                special[i] = True
                continue
            sp_from_ids[i] = first_sp_from_ids[i] = detok.piece_id(token)
            if detok.types[sp_from_ids[i]] == BYTE:
                continue
            bare = token.replace(SPACE_SYMBOL, "")
            first_empty[i] = not bare
            if bare and bare != token:
                first_sp_from_ids[i] = detok.piece_id(bare, fallback=sp_from_ids[i])
        separator = detok.add_separator()
        self._first_empty = tf.constant(first_empty.astype(np.int32))
        return (special, np.zeros(size, dtype=bool), sp_from_ids, first_sp_from_ids, separator,
                detok.piece_id(chr(separator)), detok.appended_fields())

    def _dropped_ids(self):
        index = {token: i for i, token in enumerate(self._vocab)}
        tokens = set(self._special_tokens) | set(self._languages.values())
        return np.array(sorted(index[token] for token in tokens if token in index), dtype=np.int64)

    # ----------------------------------------------------------------------------------------------------------
    # Languages.

    @property
    def style(self):
        """`"nllb"` or `"m2m_100"`: the transformers tokenizer whose ids and text this one gives."""
        return self._style

    @property
    def languages(self):
        """The language codes, a tuple in the checkpoint's id order (NLLB: `"deu_Latn"`; M2M-100: `"de"`)."""
        return tuple(self._languages)

    @property
    def language_tokens(self):
        """A dict of language code -> its token (NLLB: the code itself; M2M-100: `"de"` -> `"__de__"`)."""
        return dict(self._languages)

    @property
    def special_tokens(self):
        """The checkpoint's special tokens (`<s>`, `<mask>`, ...) that `detokenize` drops, besides the language codes
        and our `<pad>`, `<unk>`, `[START]`, `</s>`."""
        return self._special_tokens

    @property
    def source_language(self):
        """The default source language, whose code starts a source (`source_start_id`)."""
        return self._source_language

    @property
    def target_language(self):
        """The default target language (from the checkpoint's `tgt_lang`), or `None`."""
        return self._target_language

    @property
    def source_start_id(self):
        """Our id of `source_language`'s code: the first token of a packed source."""
        return self.language_id(self._source_language)

    def language_id(self, code):
        """Our id of a language code (`"deu_Latn"`; M2M-100: `"de"`).

        Raises:
            ValueError: an unknown code, in one line naming the closest valid codes.
        """
        self._check_code(code)
        return self._index[self._languages[code]]

    def with_source_language(self, code):
        """This tokenizer with another default source language (`source_start_id`); both share their tables and
        TensorFlow resources.

        Raises:
            ValueError: an unknown code, naming the closest valid codes.
        """
        self._check_code(code)
        other = copy.copy(self)
        other._source_language = str(code)
        return other

    def with_target_language(self, code):
        """This tokenizer with another default target language (also its `target_prefix_ids`: training targets are
        `[target language] Y </s>`, as transformers' `text_target` lays them out); both share their tables.

        Raises:
            ValueError: an unknown code, naming the closest valid codes.
        """
        self._check_code(code)
        other = copy.copy(self)
        other._target_language = str(code)
        return other

    @property
    def target_prefix_ids(self):
        """`(language_id(target_language),)` where there is a default target language, else `()`."""
        return () if self._target_language is None else (self.language_id(self._target_language),)

    def _check_code(self, code):
        if code in self._languages:
            return
        codes = list(self._languages)
        lowered = {c.lower(): c for c in reversed(codes)}
        closest = [lowered[c] for c in difflib.get_close_matches(str(code).lower(), list(lowered), n=4, cutoff=0.0)]
        raise ValueError(f"unknown language code {code!r}; closest: {', '.join(closest)} ({len(codes)} codes)")

    # ----------------------------------------------------------------------------------------------------------
    # TensorFlow ops.

    def tokenize(self, strings):
        """Tokenizes a batch of strings as the checkpoint's transformers tokenizer does, without the language code
        and `</s>` (see the module docstring).

        Args:
            strings: `tf.string` `[B]` (or a list of Python strings), or one string.

        Returns:
            `tf.RaggedTensor` of `int32` ids, `[B, None]` (`[None]` for one string).
        """
        strings = tf.convert_to_tensor(strings, tf.string)
        if strings.shape.rank == 0:
            return self.tokenize(tf.expand_dims(strings, 0))[0]
        if self._style == "m2m_100":
            pieces = self._sp.tokenize(strings)
            return pieces.with_flat_values(tf.gather(self._ids_from_sp, pieces.flat_values))
        count = tf.shape(strings)[0]
        probe = tf.constant(self._probe)
        both = tf.concat([strings, tf.strings.join([probe, strings, probe]), tf.strings.join([probe, strings])], 0)
        pieces = self._sp.tokenize(both)
        words = tf.reduce_sum(pieces.with_flat_values(tf.gather(self._spaces, pieces.flat_values)), axis=1)
        trailing = tf.cast(tf.greater(words[count: 2 * count], words[2 * count:]), tf.int64)
        text = pieces[:count]
        ids = text.with_flat_values(tf.gather(self._ids_from_sp, text.flat_values))
        space = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(trailing)], tf.constant(self._space_id, tf.int32)), trailing, validate=False)
        return tf.concat([ids, space], axis=1)

    def detokenize(self, ids):
        """Turns ids back into text, as the checkpoint's `decode(ids, skip_special_tokens=True)` does.

        Args:
            ids: integer ids, a dense `[B, L]` tensor (0-padded decoder output, the language code first), a
                `tf.RaggedTensor` `[B, None]`, or one sequence `[L]`.

        Returns:
            `tf.string` `[B]` (a scalar for a rank-1 input).
        """
        if self._style == "m2m_100":
            return super().detokenize(ids)
        ids = self._dense_ids(ids)
        if ids.shape.rank == 1:
            return self.detokenize(tf.expand_dims(ids, 0))[0]
        kept = 1 - tf.gather(self._special_ids, ids)
        first = tf.logical_and(tf.greater(kept, 0), tf.equal(tf.cumsum(kept, axis=1), 1))
        keep = tf.logical_and(tf.greater(kept, 0),
                              tf.logical_not(tf.logical_and(first, tf.greater(tf.gather(self._first_empty, ids), 0))))
        pieces = tf.where(first, tf.gather(self._first_sp_from_ids, ids), tf.gather(self._sp_from_ids, ids))
        # One text for the batch: a separator first (SentencePiece drops the "▁" of a text's first piece; here that
        # piece is the separator), and one after each row; the rows are the bytes between separators.
        rows = tf.shape(ids)[0]
        pieces = tf.concat([pieces, tf.fill([rows, 1], self._separator_id)], axis=1)
        keep = tf.concat([keep, tf.fill([rows, 1], True)], axis=1)
        values = tf.concat([tf.fill([1], self._separator_id), tf.boolean_mask(pieces, keep)], axis=0)
        joined = self._detokenizer.detokenize(
            tf.RaggedTensor.from_row_splits(values, tf.stack([0, tf.size(values)]), validate=False))
        data = tf.cast(self._bytes.split(joined).flat_values, tf.int32)
        separators = tf.cast(tf.reshape(tf.where(tf.equal(data, self._separator)), [-1]), tf.int32)
        texts = self._bytes.split_by_offsets(joined, tf.expand_dims(separators[:-1] + 1, 0),
                                             tf.expand_dims(separators[1:], 0))
        return tf.reshape(texts.flat_values, [-1])

    # ----------------------------------------------------------------------------------------------------------
    # Reading and saving.

    @classmethod
    def from_checkpoint(cls, directory, engine="auto"):
        """Reads the tokenizer of an M2M-100 or NLLB-200 checkpoint directory in the Hugging Face layout.

        `tokenizer_config.json`'s `tokenizer_class` picks the reader where it names one (`NllbTokenizer`,
        `NllbTokenizerFast`: `from_nllb`; `M2M100Tokenizer`: `from_m2m100`); otherwise the files do: `vocab.json`
        beside `sentencepiece.bpe.model` is M2M-100's layout, `tokenizer.json` without `vocab.json` NLLB's.

        Raises:
            ValueError: in one line naming the file that is missing or does not hold what is expected.
        """
        reader = cls.from_nllb if checkpoint_style(os.fspath(directory)) == "nllb" else cls.from_m2m100
        return reader(directory, engine=engine)

    @classmethod
    def from_nllb(cls, directory, engine="auto"):
        """Reads an NLLB-200 tokenizer: `sentencepiece.bpe.model`, `tokenizer.json` (the ids, the language codes among
        its special added tokens), and `tokenizer_config.json` / `special_tokens_map.json` where present (the special
        tokens' names, `src_lang`, `tgt_lang`, `legacy_behaviour`).

        Raises:
            ValueError: in one line naming the file that is missing or does not hold what is expected.
        """
        return cls._from_files(read_nllb_files(os.fspath(directory)), engine)

    @classmethod
    def from_m2m100(cls, directory, engine="auto"):
        """Reads an M2M-100 tokenizer: `sentencepiece.bpe.model`, `vocab.json` (the pieces' ids) and the language
        tokens (`"__de__"`) listed as additional special tokens in `tokenizer_config.json` or
        `special_tokens_map.json`, whose ids follow the vocabulary's in that order (the codes are `"de"`).

        Raises:
            ValueError: in one line naming the file that is missing or does not hold what is expected.
        """
        return cls._from_files(read_m2m100_files(os.fspath(directory)), engine)

    @classmethod
    def _from_files(cls, files, engine):
        """The tokenizer of what `multilingual_files` read (the constructor's arguments and the files' paths)."""
        spm_path, vocab_path = files.pop("spm_path"), files.pop("vocab_path")
        with open(spm_path, "rb") as f:
            model_proto = f.read()
        return cls._build(model_proto, files.pop("original_vocab"), spm_path, vocab_path, engine=engine, **files)

    def get_config(self):
        return {**super().get_config(), "style": self._style, "languages": dict(self._languages),
                "source_language": self._source_language, "target_language": self._target_language,
                "special_tokens": list(self._special_tokens)}

    @classmethod
    def _arguments_from_config(cls, config, config_path):
        arguments = super()._arguments_from_config(config, config_path)
        languages, special = config.get("languages"), config.get("special_tokens")
        if not isinstance(languages, dict) or not all(isinstance(v, str) for v in languages.values()):
            raise ValueError(f"{config_path}:1: expected \"languages\", an object of language code -> token")
        if not isinstance(special, list) or not all(isinstance(token, str) for token in special):
            raise ValueError(f"{config_path}:1: expected \"special_tokens\", a list of strings")
        if config.get("style") not in STYLES:
            raise ValueError(f"{config_path}:1: expected a \"style\" in {STYLES}, got {config.get('style')!r}")
        for key in ("source_language", "target_language"):
            value = config.get(key)
            if not (isinstance(value, str) and value in languages) and (key == "source_language" or value is not None):
                raise ValueError(f"{config_path}:1: expected a {key!r} among \"languages\", got {value!r}")
        return {**arguments, "languages": languages, "special_tokens": special, "style": config["style"],
                "source_language": config["source_language"], "target_language": config.get("target_language")}

    def __repr__(self):
        return (f"MultilingualTokenizer(vocab_size={self.vocab_size}, languages={len(self._languages)}, "
                f"style={self._style!r}, source_language={self._source_language!r}, engine={self.engine!r})")


# --------------------------------------------------------------------------------------------------------------
# Helpers.


def _probe_letter(pieces, types):
    """A character that is a piece of the model by itself, a letter or digit that normalization keeps and that joins
    no neighbour (an ASCII one where there is one): the probe of the `"nllb"` style's trailing-whitespace test."""
    singles = [piece for piece, kind in zip(pieces, types) if kind == NORMAL and len(piece) == 1]
    for letter in sorted(singles, key=lambda c: (not c.isascii(), c)):
        if letter.isalnum() and unicodedata.normalize("NFKC", letter) == letter:
            return letter
    return "a"


__all__ = ["MultilingualTokenizer", "STYLES"]
