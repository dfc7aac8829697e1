"""`SubwordTokenizer`: a cased WordPiece vocabulary learned from the corpus, run by tensorflow-text.

Tokenizing uses `tensorflow_text.FastWordpieceTokenizer` in end-to-end mode: it splits whitespace and
punctuation itself, then cuts each word into vocabulary pieces (`"##"` marks a piece that continues a word).
`keras_transformer.data.words.split_words` reproduces that word splitting in Python so that the learned vocabulary
fits what the tokenizer sees; `keras_transformer.data.vocabulary` learns the vocabulary and the flags below.

Detokenizing must stay readable *and* convertible to TFLite without the Flex delegate (no regex or other string
ops). FastWordpiece's own detokenizer joins every word with a space ("a t - shirt ."). While training we learn
flags per token id from the character offsets of the corpus, by majority vote (punctuation only):

* `attach_left[id]`: the token usually follows the previous one with no space (`.`, `,`, `)`, `-`, `'`);
* `attach_right[id]`: the next token usually follows it with no space (`(`, `-`, `'`);
* `paired[id]`: a mark that opens and closes by turns (the ASCII `"`): odd occurrences in a sentence glue to the
  next token, even ones to the previous token (a `tf.cumsum` of the mark's occurrences gives the parity).

A second FastWordpiece model, used only to detokenize, has the normal vocabulary plus a `"##"`-prefixed copy of
every word-initial token (a piece that already starts with `"##"` is its own copy). `detokenize` swaps a token for
its glued copy where `attach_left[token] or attach_right[previous token]` holds (the first token of a sentence is
never glued), using only integer ops (`tf.gather`, `tf.where`, `tf.cumsum`), and lets FastWordpiece glue `"##"`
pieces to the previous one.
"""

import collections
import json
import os
import weakref

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from keras_transformer.data.corpus import as_corpus
from keras_transformer.data.tokenizer_base import CONFIG_FILE
from keras_transformer.data.tokenizer_base import Tokenizer
from keras_transformer.data.vocabulary import RESERVED_TOKENS
from keras_transformer.data.vocabulary import SUFFIX_INDICATOR
from keras_transformer.data.vocabulary import learn_attachment
from keras_transformer.data.vocabulary import learn_wordpiece_vocabulary
from keras_transformer.data.words import count_words
from keras_transformer.data.words import is_blank  # noqa: F401 - re-exported
from keras_transformer.data.words import split_words  # noqa: F401 - re-exported

_VOCAB_FILE = "vocab.txt"
_FORMAT = "keras_transformer.SubwordTokenizer"


_DETOKENIZE_FUNCTIONS = weakref.WeakKeyDictionary()


class SubwordTokenizer(Tokenizer):
    """A cased WordPiece tokenizer with readable, TFLite-friendly detokenization.

    Ids are `int32`: `[PAD]`=0, `[UNK]`=1, `[START]`=2, `[END]`=3, then the learned pieces. Case is preserved.
    `tokenize` and `detokenize` are pure TensorFlow (tensorflow-text ops plus integer ops), so they work inside a
    `tf.function`, a SavedModel, and a TFLite model converted with `TFLITE_BUILTINS` plus tensorflow-text's custom
    ops. The object is a `tf.Module`, so a SavedModel that holds it also holds its vocabularies.

    Args:
        vocab: list of tokens; must start with `RESERVED_TOKENS`.
        attach_left: ids (or a boolean mask of length `len(vocab)`) of the tokens that attach to the previous
            token when detokenizing.
        attach_right: ids (or a boolean mask) of the tokens that the next token attaches to.
        paired: ids (or a boolean mask) of marks that open and close by turns, like `"`: within a sequence, odd
            occurrences attach to the next token and even ones to the previous token.
        max_bytes_per_word: longer words become `[UNK]`.

    Example:

    >>> texts = ["A man in a t-shirt, smiling.", "Two dogs (brown) run."] * 50
    >>> tokenizer = SubwordTokenizer.train(texts, vocab_size=200, verbose=0)
    >>> ids = tokenizer.tokenize(["A man in a t-shirt."])
    >>> tokenizer.detokenize(ids).numpy()
    array([b'A man in a t-shirt.'], dtype=object)

    References:
        Wu et al., 2016, "Google's Neural Machine Translation System" (WordPiece,
        https://arxiv.org/abs/1609.08144); Song et al., 2021, "Fast WordPiece Tokenization"
        (https://arxiv.org/abs/2012.15524).
    """

    def __init__(self, vocab, attach_left=(), attach_right=(), paired=(), max_bytes_per_word=100):
        super().__init__(name="subword_tokenizer")
        vocab = [str(token) for token in vocab]
        if tuple(vocab[: len(RESERVED_TOKENS)]) != RESERVED_TOKENS:
            raise ValueError(
                f"the vocabulary must start with the reserved tokens {list(RESERVED_TOKENS)}, "
                f"got {vocab[: len(RESERVED_TOKENS)]}"
            )
        if len(set(vocab)) != len(vocab):
            duplicates = sorted(token for token, n in collections.Counter(vocab).items() if n > 1)
            raise ValueError(f"the vocabulary has duplicate tokens: {duplicates[:10]}")
        self._vocab = tuple(vocab)
        self.max_bytes_per_word = int(max_bytes_per_word)
        self._attach_left = self._as_mask(attach_left, "attach_left")
        self._attach_right = self._as_mask(attach_right, "attach_right")
        self._paired = self._as_mask(paired, "paired")

        self._tokenizer = self._wordpiece(vocab, pretokenize=True)
        # Detokenization model: the vocabulary, then a "##" copy of each word-initial token that lacks one.
        index = {token: i for i, token in enumerate(vocab)}
        detok_vocab = list(vocab)
        glue_ids = np.arange(len(vocab), dtype=np.int32)
        for i, token in enumerate(vocab):
            if token.startswith(SUFFIX_INDICATOR):
                continue  # already glued to the previous piece
            glued = SUFFIX_INDICATOR + token
            if glued not in index:
                index[glued] = len(detok_vocab)
                detok_vocab.append(glued)
            glue_ids[i] = index[glued]
        self._detokenizer = self._wordpiece(detok_vocab, pretokenize=False)
        self._glue_ids = tf.constant(glue_ids, tf.int32)
        self._attach_left_ids = tf.constant(self._attach_left.astype(np.int32))
        self._attach_right_ids = tf.constant(self._attach_right.astype(np.int32))
        self._paired_ids = tuple(int(i) for i in np.flatnonzero(self._paired))


    def _wordpiece(self, vocab, pretokenize):
        """tensorflow-text's `FastWordpieceTokenizer` over `vocab` (`pretokenize`: it splits words itself)."""
        return tf_text.FastWordpieceTokenizer(vocab=vocab, suffix_indicator=SUFFIX_INDICATOR,
                                              max_bytes_per_word=self.max_bytes_per_word, token_out_type=tf.int32,
                                              unknown_token="[UNK]", no_pretokenization=not pretokenize,
                                              support_detokenization=True)
    def _as_mask(self, flags, name):
        flags = np.asarray(flags if flags is not None else [])
        if flags.dtype == bool and flags.shape == (len(self._vocab),):
            return flags.copy()
        mask = np.zeros(len(self._vocab), dtype=bool)
        if flags.size:
            ids = flags.astype(np.int64).reshape(-1)
            if ids.min() < 0 or ids.max() >= len(self._vocab):
                raise ValueError(f"{name} has ids outside [0, {len(self._vocab)})")
            mask[ids] = True
        return mask

    # ----------------------------------------------------------------------------------------------------------
    # Properties.

    @property
    def attach_left(self):
        """Boolean NumPy array `[vocab_size]`: token attaches to the previous one when detokenizing."""
        return self._attach_left.copy()

    @property
    def attach_right(self):
        """Boolean NumPy array `[vocab_size]`: the next token attaches to this one when detokenizing."""
        return self._attach_right.copy()

    @property
    def paired(self):
        """Boolean NumPy array `[vocab_size]`: marks glued by parity (opening, closing) when detokenizing."""
        return self._paired.copy()

    # ----------------------------------------------------------------------------------------------------------
    # TensorFlow ops.

    def tokenize(self, strings):
        """Tokenizes a batch of strings.

        Args:
            strings: `tf.string` `[B]` (or a list of Python strings).

        Returns:
            `tf.RaggedTensor` of `int32` ids, `[B, None]`, without `[START]`/`[END]`.
        """
        return self._tokenizer.tokenize(tf.convert_to_tensor(strings, tf.string))

    def tokenize_with_offsets(self, strings):
        """Like `tokenize`, plus ragged `int64` byte offsets `(starts, ends)` of each piece."""
        return self._tokenizer.tokenize_with_offsets(tf.convert_to_tensor(strings, tf.string))

    def detokenize(self, ids):
        """Turns ids back into readable text.

        `[PAD]`, `[START]` and `[END]` are dropped wherever they are (`[UNK]` stays as the text `[UNK]`), and
        punctuation is re-attached by the learned `attach_left`/`attach_right`/`paired` flags. Only integer ops and
        FastWordpiece's detokenizer are used, so this converts to TFLite without Flex ops.

        Args:
            ids: integer ids, a dense `[B, L]` tensor (e.g. 0-padded decoder output, static shape allowed), a
                `tf.RaggedTensor` `[B, None]`, or one sequence `[L]`.

        Returns:
            `tf.string` `[B]` (a scalar for a rank-1 input).
        """
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=self.pad_id)
        ids = tf.cast(tf.convert_to_tensor(ids), tf.int32)
        if ids.shape.rank == 1:
            return self.detokenize(tf.expand_dims(ids, 0))[0]
        if tf.executing_eagerly():
            # One traced function instead of some thirty eager ops: a server detokenizes every batch. (Cached
            # outside the module, so that a SavedModel tracking this tokenizer does not save it.)
            function = _DETOKENIZE_FUNCTIONS.get(self)
            if function is None:
                owner = weakref.ref(self)  # the cached function must not keep its key alive
                function = _DETOKENIZE_FUNCTIONS[self] = tf.function(
                    lambda rows: owner()._detokenize_rows(rows),
                    input_signature=[tf.TensorSpec([None, None], tf.int32)], autograph=False)
            return function(ids)
        return self._detokenize_rows(ids)

    def _detokenize_rows(self, ids):
        """`detokenize` of int32 `[B, L]` ids, as graph ops."""
        keep = tf.logical_not(
            tf.logical_or(
                tf.equal(ids, self.pad_id),
                tf.logical_or(tf.equal(ids, self.start_id), tf.equal(ids, self.end_id)),
            )
        )
        keep_int = tf.cast(keep, tf.int32)
        # A kept token is first in its row when it is the first kept one: it is never glued.
        not_first = keep_int * tf.cast(tf.greater(tf.cumsum(keep_int, axis=1), 1), tf.int32)
        left = tf.gather(self._attach_left_ids, ids)
        right = tf.gather(self._attach_right_ids, ids)
        for mark in self._paired_ids:
            # Odd occurrences of a paired mark in a row open (glue the next token), even ones close.
            is_mark = tf.cast(tf.equal(ids, mark), tf.int32)
            odd = tf.math.floormod(tf.cumsum(is_mark, axis=1), 2)
            left = left * (1 - is_mark) + is_mark * (1 - odd)
            right = right * (1 - is_mark) + is_mark * odd
        positions = tf.reshape(tf.where(tf.reshape(keep, [-1])), [-1])
        values = tf.gather(tf.reshape(ids, [-1]), positions)
        left = tf.gather(tf.reshape(left, [-1]), positions)
        right = tf.gather(tf.reshape(right, [-1]), positions)
        previous_right = tf.concat([tf.zeros([1], tf.int32), right[:-1]], axis=0)
        glue = tf.maximum(left, previous_right) * tf.gather(tf.reshape(not_first, [-1]), positions)
        values = tf.where(tf.greater(glue, 0), tf.gather(self._glue_ids, values), values)
        row_splits = tf.concat(
            [tf.zeros([1], tf.int64), tf.cumsum(tf.reduce_sum(tf.cast(keep, tf.int64), axis=1))], axis=0
        )
        ragged = tf.RaggedTensor.from_row_splits(values, row_splits, validate=False)
        return self._detokenizer.detokenize(ragged)

    # ----------------------------------------------------------------------------------------------------------
    # Training.

    @classmethod
    def train(
        cls,
        texts,
        vocab_size=8000,
        lower_thresh=2,
        max_unique_chars=1000,
        max_bytes_per_word=100,
        batch_size=1024,
        verbose=1,
    ):
        """Learns a WordPiece vocabulary and the detokenization flags from texts.

        Args:
            texts: iterable of Python strings (one sentence each). For a shared tokenizer pass source and target
                sentences together (see `train_tokenizers(shared=True)`).
            vocab_size: target vocabulary size including the 4 reserved tokens; the learner lands within 5%
                below it (a small corpus may give fewer tokens).
            lower_thresh: smallest count for which a piece may enter the vocabulary. The learner raises the count
                threshold until the vocabulary fits `vocab_size`; a high floor (tensorflow-text's default is 10)
                can stop it well short of `vocab_size` on a small corpus.
            max_unique_chars: the most frequent characters kept in the alphabet; words with rarer ones are left
                out of learning (and become `[UNK]` if no piece covers them).
            max_bytes_per_word: longer words are tokenized as `[UNK]`.
            batch_size: sentences per tokenizer call while learning the attachment flags.
            verbose: 0 quiet, 1 progress bars and a summary line.

        Returns:
            A trained `SubwordTokenizer`.

        Example:

        >>> tokenizer = SubwordTokenizer.train(["It's 5 o'clock."] * 20, vocab_size=100, verbose=0)
        >>> tokenizer.detokenize(tokenizer.tokenize(["It's 5 o'clock."])).numpy()[0]
        b"It's 5 o'clock."
        """
        texts = [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in texts]
        if verbose:
            print(f"Counting words in {len(texts):,} sentences")
        counts = count_words(texts, verbose=verbose)
        if verbose:
            print(f"Learning a WordPiece vocabulary of up to {vocab_size:,} tokens from {len(counts):,} words")
        vocab = learn_wordpiece_vocabulary(counts, vocab_size, RESERVED_TOKENS, lower_thresh, max_unique_chars, verbose)
        tokenizer = cls(vocab, max_bytes_per_word=max_bytes_per_word)
        tokenizer = tokenizer.with_attachment_learned_from(texts, batch_size=batch_size, verbose=verbose)
        if verbose:
            print(
                f"Trained a {tokenizer.vocab_size:,}-token vocabulary; {int(tokenizer.attach_left.sum())} tokens "
                f"attach left, {int(tokenizer.attach_right.sum())} attach right"
            )
        return tokenizer

    def with_attachment_learned_from(self, texts, batch_size=1024, punctuation_only=True, min_count=5, verbose=0):
        """Returns a copy whose detokenization flags are learned from `texts` (see `vocabulary.learn_attachment`)."""
        attach_left, attach_right, paired = learn_attachment(
            self, texts, batch_size=batch_size, punctuation_only=punctuation_only, min_count=min_count,
            verbose=verbose)
        return type(self)(self._vocab, attach_left=attach_left, attach_right=attach_right, paired=paired,
                          max_bytes_per_word=self.max_bytes_per_word)

    # ----------------------------------------------------------------------------------------------------------
    # Saving.

    def get_config(self):
        return {
            "format": _FORMAT,
            "version": 1,
            "vocab_size": self.vocab_size,
            "reserved_tokens": list(RESERVED_TOKENS),
            "suffix_indicator": SUFFIX_INDICATOR,
            "max_bytes_per_word": self.max_bytes_per_word,
            "attach_left": np.flatnonzero(self._attach_left).tolist(),
            "attach_right": np.flatnonzero(self._attach_right).tolist(),
            "paired": np.flatnonzero(self._paired).tolist(),
        }

    def save(self, directory):
        """Writes `vocab.txt` (one token per line) and `tokenizer.json` (flags and settings) into `directory`."""
        self._write_config(directory)
        with open(os.path.join(directory, _VOCAB_FILE), "w", encoding="utf-8", newline="\n") as f:
            f.write("\n".join(self._vocab) + "\n")

    @classmethod
    def load(cls, directory):
        """Loads a tokenizer written by `save`.

        Raises:
            ValueError: naming the file (and line) when a file is missing or does not match the format.
        """
        vocab_path = os.path.join(directory, _VOCAB_FILE)
        config_path = os.path.join(directory, CONFIG_FILE)
        for path in (vocab_path, config_path):
            if not os.path.exists(path):
                raise FileNotFoundError(f"{path}: not found; expected a tokenizer saved by SubwordTokenizer.save")
        with open(config_path, encoding="utf-8") as f:
            try:
                config = json.load(f)
            except json.JSONDecodeError as error:
                raise ValueError(f"{config_path}:{error.lineno}: expected JSON ({error.msg})") from None
            except UnicodeDecodeError:
                raise ValueError(f"{config_path}: expected UTF-8 JSON, found binary data (damaged?)") from None
        if not isinstance(config, dict) or not isinstance(config.get("vocab_size"), int):
            raise ValueError(f"{config_path}:1: expected a JSON object with an integer \"vocab_size\"")
        if config.get("format") != _FORMAT:
            raise ValueError(f"{config_path}:1: expected \"format\": \"{_FORMAT}\", got {config.get('format')!r}")
        with open(vocab_path, "rb") as f:
            data = f.read()
        try:
            vocab = data.decode("utf-8").split("\n")
        except UnicodeDecodeError as error:
            line = data.count(b"\n", 0, error.start) + 1
            raise ValueError(f"{vocab_path}:{line}: expected UTF-8 text, found "
                             f"the byte 0x{data[error.start]:02x} (damaged?)") from None
        if vocab and vocab[-1] == "":
            vocab.pop()
        for line, (token, expected) in enumerate(zip(vocab, RESERVED_TOKENS), start=1):
            if token != expected:
                raise ValueError(f"{vocab_path}:{line}: expected the reserved token {expected}, found {token!r}")
        if len(vocab) != config["vocab_size"]:
            raise ValueError(
                f"{vocab_path}:{len(vocab)}: expected {config['vocab_size']} tokens as {config_path} says, "
                f"found {len(vocab)}"
            )
        return cls(
            vocab,
            attach_left=config.get("attach_left", []),
            attach_right=config.get("attach_right", []),
            paired=config.get("paired", []),
            max_bytes_per_word=config.get("max_bytes_per_word", 100),
        )

    def __repr__(self):
        return f"SubwordTokenizer(vocab_size={self.vocab_size})"


def train_tokenizers(corpus, vocab_size=8000, shared=False, verbose=1, **kwargs):
    """Trains the source and target tokenizers of a parallel corpus.

    Args:
        corpus: a `ParallelCorpus` (or anything `as_corpus` accepts).
        vocab_size: vocabulary size of each tokenizer (of the single one when `shared`).
        shared: train one tokenizer on source and target text together and return it twice (needed to tie the
            source embedding, target embedding and output projection).
        verbose: 0 quiet, 1 progress bars.
        **kwargs: passed to `SubwordTokenizer.train`.

    Returns:
        `(source_tokenizer, target_tokenizer)`; the same object twice when `shared`.

    Example:

    >>> from keras_transformer.data import make_synthetic_corpus
    >>> corpus = make_synthetic_corpus(200, seed=0)
    >>> src, tgt = train_tokenizers(corpus, vocab_size=300, shared=True, verbose=0)
    >>> src is tgt
    True
    """
    corpus = as_corpus(corpus)
    if shared:
        if verbose:
            print("Training a shared source+target tokenizer")
        tokenizer = SubwordTokenizer.train(
            list(corpus.sources) + list(corpus.targets), vocab_size=vocab_size, verbose=verbose, **kwargs
        )
        return tokenizer, tokenizer
    if verbose:
        print("Training the source tokenizer")
    source = SubwordTokenizer.train(corpus.sources, vocab_size=vocab_size, verbose=verbose, **kwargs)
    if verbose:
        print("Training the target tokenizer")
    target = SubwordTokenizer.train(corpus.targets, vocab_size=vocab_size, verbose=verbose, **kwargs)
    return source, target


def tokenizers_are_shared(source_tokenizer, target_tokenizer):
    """Whether two tokenizers have the same vocabulary (so embeddings can be tied)."""
    return source_tokenizer is target_tokenizer or source_tokenizer.vocab == target_tokenizer.vocab
