"""The one source packer: `[START] ids[:max_length - 2] [END]` per row, 0-padded (keras-hub's `StartEndPacker` role).

A tokenizer says which start id its sources carry (`source_start_id`): our WordPiece vocabularies put `[START]`
first; SentencePiece vocabularies imported from Marian checkpoints carry none (`ids[:max_length - 1] [END]`).

Training (`pipeline`), the Python translator and the exported graph (`export.translator_module`) all pack sources
with `pack_sources`, so a sentence reaches the encoder as the same ids everywhere. It uses only ops that convert to
TFLite builtins (`RaggedTensorToTensor` with a static width, `where`, `concat`).

keras-hub's `StartEndPacker` pads every row to a fixed `sequence_length`; the length-bucketed training batches and
the decoders here want rows padded only to the longest one in the batch, hence a packer of our own.

Example:

>>> import tensorflow as tf
>>> ids, has_tokens = pack_sources(tf.ragged.constant([[7, 8, 9, 10], [], [5]]), start_id=2, end_id=3, max_length=5)
>>> ids.numpy().tolist(), has_tokens.numpy().tolist()
([[2, 7, 8, 9, 3], [2, 3, 0, 0, 0], [2, 5, 3, 0, 0]], [True, False, True])
>>> pack_sources(tf.ragged.constant([[7, 8, 9, 10], [5]]), start_id=None, end_id=3, max_length=4)[0].numpy().tolist()
[[7, 8, 9, 3], [5, 3, 0, 0]]
"""

import numpy as np
import tensorflow as tf


def pack_sources(token_ids, start_id, end_id, max_length):
    """Packs ragged subword ids into encoder inputs.

    Args:
        token_ids: `tf.RaggedTensor` `[B, None]` of subword ids (a tokenizer's output, no `[START]`/`[END]`).
        start_id, end_id: the `[START]` and `[END]` ids; `start_id=None` packs no start token.
        max_length: the longest packed row (`[START]` and `[END]` included); longer rows are truncated.

    Returns:
        `(ids, has_tokens)`: int32 `[B, S]` with `S` = the longest packed row, 0-padded, and bool `[B]`, whether
        a row had any token.
    """
    starts = 0 if start_id is None else 1
    width = max_length - 1 - starts
    # `to_tensor` with a static width truncates long rows (one RaggedTensorToTensor op, TFLite-friendly).
    tokens = tf.cast(token_ids.to_tensor(default_value=0, shape=[None, width]), tf.int32)
    lengths = tf.minimum(tf.cast(token_ids.row_lengths(), tf.int32), width)
    batch_size = tf.shape(tokens)[0]
    longest = tf.reduce_max(tf.concat([lengths, tf.zeros([1], tf.int32)], axis=0))
    columns = [tokens[:, :longest], tf.zeros([batch_size, 1], tf.int32)]
    if start_id is not None:
        columns.insert(0, tf.fill([batch_size, 1], tf.constant(start_id, tf.int32)))
    ids = tf.concat(columns, axis=1)
    positions = tf.expand_dims(tf.range(longest + 1 + starts, dtype=tf.int32), 0)
    ids = tf.where(tf.equal(positions, tf.expand_dims(lengths + starts, 1)), tf.constant(end_id, tf.int32), ids)
    return ids, tf.greater(lengths, 0)


def pack_rows(rows, start_id, end_id, max_length):
    """`pack_sources` on Python lists of ids (the translator's already-tokenized rows); a NumPy int32 array.

    The same layout, computed in NumPy: a server packs every batch, and TensorFlow's eager ragged ops cost more than
    the decoding of a small batch (tests/data/test_packing.py checks that both give the same ids)."""
    starts = 0 if start_id is None else 1
    kept = [row[: max_length - 1 - starts] for row in rows]
    longest = max((len(row) for row in kept), default=0)
    ids = np.zeros((len(kept), longest + 1 + starts), dtype="int32")
    if starts:
        ids[:, 0] = start_id
    for index, row in enumerate(kept):
        ids[index, starts: starts + len(row)] = row
        ids[index, starts + len(row)] = end_id
    return ids
