"""Which sentence pairs fit the model: the one length rule of training, of its counts and of the run's record.

A pair fits when its packed source (`[START] tokens [END]`, or `tokens [END]` for a tokenizer whose sources carry no
start token) and its decoder input (`[START]`, a multilingual target's language code, the target tokens) each hold
at most `max_length` tokens. Pairs that do not fit are skipped, as OpenNMT, fairseq and Marian skip them, never cut:
a cut target would end without its `[END]` where the sentence goes on, and teach the model to stop early; a cut
source would no longer say what its target says.

Example:

>>> import tensorflow as tf
>>> from keras_transformer.data import make_synthetic_corpus, train_tokenizers
>>> corpus = make_synthetic_corpus(64, seed=0)
>>> src, tgt = train_tokenizers(corpus, vocab_size=300, verbose=0)
>>> pairs = tf.data.Dataset.from_tensor_slices((["1 2 3 4 5 6 7 8 9", "1 2"], ["a", "b"]))
>>> count_too_long(pairs, src, tgt, max_length=6)
1
"""

import tensorflow as tf


def token_room(source_tokenizer, target_tokenizer, max_length):
    """`(source tokens, target tokens)`: the most subword tokens of each side that fit `max_length`."""
    source_room = max_length - 1 - (0 if source_tokenizer.source_start_id is None else 1)
    target_room = max_length - 1 - len(list(target_tokenizer.target_prefix_ids))
    return source_room, target_room


def fitting_rows(source_ids, target_ids, source_tokenizer, target_tokenizer, max_length):
    """Bool `[B]`: which rows of tokenized sources and targets (ragged `[B, None]`) fit `max_length`."""
    source_room, target_room = token_room(source_tokenizer, target_tokenizer, max_length)
    return tf.logical_and(source_ids.row_lengths() <= source_room, target_ids.row_lengths() <= target_room)


def count_too_long(pairs, source_tokenizer, target_tokenizer, max_length, tokenize_batch_size=1024):
    """The number of pairs of a finite dataset of `(source, target)` strings that do not fit `max_length`.

    One tokenization pass; memory bounded by `tokenize_batch_size` pairs.
    """

    def too_long(sources, targets):
        fits = fitting_rows(source_tokenizer.tokenize(sources), target_tokenizer.tokenize(targets),
                            source_tokenizer, target_tokenizer, max_length)
        return tf.reduce_sum(tf.cast(tf.logical_not(fits), tf.int64))

    counts = pairs.batch(tokenize_batch_size).map(too_long, num_parallel_calls=tf.data.AUTOTUNE)
    return int(counts.reduce(tf.constant(0, tf.int64), lambda total, count: total + count))
