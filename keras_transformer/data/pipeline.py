"""The `tf.data` input pipeline: sentence pairs -> tokenized, bucketed, padded training batches.

Each element is `({"encoder_inputs": int32 [B, S], "decoder_inputs": int32 [B, T]}, labels int32 [B, T])`:

* `encoder_inputs` = `[START] source [END]`, `S <= max_length`;
* `decoder_inputs` = `[START] target` and `labels` = `target [END]` (teacher forcing, shifted by one),
  `T <= max_length`.

A pair whose source or target does not fit `max_length` is skipped, not cut (`keras_transformer.data.lengths`).

All three are 0-padded (`[PAD]` = 0) to a multiple of `pad_to_multiple` (8 by default), so a whole epoch has only
a few distinct shapes: little padding, and few retracings/XLA recompilations.
"""

import time

import numpy as np
import tensorflow as tf

from keras_transformer.data.corpus import ParallelCorpus
from keras_transformer.data.corpus import as_corpus
from keras_transformer.data.lengths import fitting_rows
from keras_transformer.data.packing import pack_sources

AUTOTUNE = tf.data.AUTOTUNE


def _bucket_boundaries(max_length, step):
    """Upper bounds (exclusive) of the length buckets: step+1, 2*step+1, ..., max_length+1."""
    boundaries = list(range(step + 1, max_length + 1, step))
    if not boundaries or boundaries[-1] != max_length + 1:
        boundaries.append(max_length + 1)
    return boundaries


def make_dataset(data, source_tokenizer, target_tokenizer, batch_size=64, max_length=64, shuffle=True, bucket=True,
                 cache=True, shuffle_buffer=None, seed=None, pad_to_multiple=8, same_length=False, token_budget=None,
                 drop_remainder=False, tokenize_batch_size=1024):
    """Builds the training/evaluation `tf.data.Dataset` from sentence pairs.

    Args:
        data: a `ParallelCorpus`, a `(sources, targets)` pair of lists, or a `tf.data.Dataset` of `(source,
            target)` scalar strings (streamed; pairs with a blank side are filtered out).
        source_tokenizer: `SubwordTokenizer` of the source language.
        target_tokenizer: `SubwordTokenizer` of the target language (may be the same object).
        batch_size: sentence pairs per batch (the largest batch when `token_budget` is set).
        max_length: the longest `encoder_inputs`/`decoder_inputs`; pairs that do not fit are skipped.
        shuffle: shuffle pairs (reshuffled every epoch).
        bucket: group pairs of similar length (`tf.data.Dataset.bucket_by_sequence_length`) so that batches carry
            little padding.
        cache: keep the tokenized pairs in memory after the first epoch (`True`), in a cache file (a path), or
            not at all (`False`).
        shuffle_buffer: shuffle buffer size; default all pairs of a corpus (at most 100,000), 10,000 for a stream.
        seed: shuffle seed, for reproducible order.
        pad_to_multiple: pad `S` and `T` up to a multiple of this; 1 pads to the longest sequence of the batch.
        same_length: pad `encoder_inputs` and `decoder_inputs` to one length, `max(S, T)` rounded up to
            `pad_to_multiple`. With bucketing every bucket then has one shape, so an XLA-compiled training
            step compiles once per bucket instead of once per `(S, T)` combination.
        token_budget: if set (with `bucket`), each bucket's batch size is `token_budget // bucket_length` (at
            most `batch_size`, rounded down to a multiple of 8 when above 8), so batches of short sentences hold
            more sentences and every batch has about the same number of tokens.
        drop_remainder: drop the last, smaller batch of each bucket (fixed batch sizes).
        tokenize_batch_size: sentences per tokenizer call.

    Returns:
        A `tf.data.Dataset` of `({"encoder_inputs", "decoder_inputs"}, labels)`, all `int32`, prefetched.

    Example:

    >>> from keras_transformer.data import make_synthetic_corpus, train_tokenizers
    >>> corpus = make_synthetic_corpus(256, seed=0)
    >>> src, tgt = train_tokenizers(corpus, vocab_size=300, verbose=0)
    >>> ds = make_dataset(corpus, src, tgt, batch_size=32, max_length=32)
    >>> inputs, labels = next(iter(ds))
    >>> inputs["encoder_inputs"].dtype, labels.shape[1] % 8
    (tf.int32, 0)
    """
    if max_length < 3:
        raise ValueError(f"max_length must be at least 3 ([START] token [END]), got {max_length}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    pairs, num_pairs = _string_pairs(data)
    dataset = _tokenize(pairs, source_tokenizer, target_tokenizer, max_length, tokenize_batch_size)
    if cache:
        dataset = dataset.cache(cache if isinstance(cache, str) else "")
    if shuffle:
        if shuffle_buffer is None:
            shuffle_buffer = min(num_pairs, 100_000) if num_pairs else 10_000
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    dataset = _batch(dataset, batch_size, max_length, bucket, token_budget, pad_to_multiple, same_length,
                     drop_remainder)
    return dataset.prefetch(AUTOTUNE)


def _string_pairs(data):
    """`(dataset of (source, target) strings, number of pairs or None for a stream)`; a stream's pairs with a
    blank side are filtered out, an empty corpus is refused."""
    if isinstance(data, tf.data.Dataset):
        return data.filter(lambda source, target: tf.logical_and(
            tf.strings.length(tf.strings.strip(source)) > 0, tf.strings.length(tf.strings.strip(target)) > 0)), None
    corpus = data if isinstance(data, ParallelCorpus) else as_corpus(data)
    if not len(corpus):
        raise ValueError(f"{corpus.name}: no sentence pairs to build a dataset from")
    return corpus.to_dataset(), len(corpus)


def _tokenize(pairs, source_tokenizer, target_tokenizer, max_length, tokenize_batch_size=1024):
    """String pairs -> (encoder_inputs, decoder_inputs, labels) int32 rows; pairs that do not fit are skipped."""
    start_src, end_src = source_tokenizer.source_start_id, source_tokenizer.end_id
    start_tgt, end_tgt = target_tokenizer.start_id, target_tokenizer.end_id
    prefix = list(target_tokenizer.target_prefix_ids)  # a multilingual target: its language code first

    def encode(sources, targets):
        def column(value):
            return tf.fill([rows, 1], tf.constant(value, tf.int32))

        source_ids, target_ids = source_tokenizer.tokenize(sources), target_tokenizer.tokenize(targets)
        # Pairs that do not fit are skipped, never cut (`lengths`); `count_too_long` counts them.
        fits = fitting_rows(source_ids, target_ids, source_tokenizer, target_tokenizer, max_length)
        source_ids, target_ids = tf.ragged.boolean_mask(source_ids, fits), tf.ragged.boolean_mask(target_ids, fits)
        rows = tf.shape(source_ids.row_lengths())[0]
        if prefix:
            target_ids = tf.concat([tf.tile(tf.constant([prefix], tf.int32), [rows, 1]), target_ids], axis=1)

        # The one source packer (also the translator's and the exported graph's), back to ragged rows.
        packed, _ = pack_sources(source_ids, start_src, end_src, max_length)
        encoder_inputs = tf.RaggedTensor.from_tensor(packed, padding=0)
        decoder_inputs = tf.concat([column(start_tgt), target_ids], axis=1)
        labels = tf.concat([target_ids, column(end_tgt)], axis=1)
        return encoder_inputs, decoder_inputs, labels

    def as_dense(*sequences):
        # After `unbatch`, 1-D ragged rows are plain tensors; make the element spec say so for `padded_batch`.
        return tuple(x.flat_values if isinstance(x, tf.RaggedTensor) else x for x in sequences)

    return pairs.batch(tokenize_batch_size).map(encode, num_parallel_calls=AUTOTUNE).unbatch().map(as_dense)


def _batch(dataset, batch_size, max_length, bucket, token_budget, pad_to_multiple, same_length, drop_remainder):
    """Token rows -> bucketed (or plain) padded batches of `({"encoder_inputs", "decoder_inputs"}, labels)`."""
    if bucket:
        boundaries = _bucket_boundaries(max_length, max(pad_to_multiple, 8))
        if token_budget:
            sizes = []
            for bound in boundaries + [max_length + 1]:
                size = max(1, min(batch_size, token_budget // max(bound - 1, 1)))
                sizes.append(size - size % 8 if size > 8 else size)
        else:
            sizes = [batch_size] * (len(boundaries) + 1)
        dataset = dataset.bucket_by_sequence_length(
            element_length_func=lambda enc, dec, lab: tf.maximum(tf.shape(enc)[0], tf.shape(dec)[0]),
            bucket_boundaries=boundaries,
            bucket_batch_sizes=sizes,
            padded_shapes=([None], [None], [None]),
            padding_values=(0, 0, 0),
            drop_remainder=drop_remainder,
        )
    else:
        dataset = dataset.padded_batch(
            batch_size, padded_shapes=([None], [None], [None]), padding_values=(0, 0, 0), drop_remainder=drop_remainder
        )

    def to_model_inputs(encoder_inputs, decoder_inputs, labels):
        if same_length:
            length = tf.maximum(tf.shape(encoder_inputs)[1], tf.shape(decoder_inputs)[1])
            encoder_inputs = _pad_to(encoder_inputs, length, pad_to_multiple)
            decoder_inputs = _pad_to(decoder_inputs, length, pad_to_multiple)
            labels = _pad_to(labels, length, pad_to_multiple)
        elif pad_to_multiple > 1:
            encoder_inputs = _pad_length(encoder_inputs, pad_to_multiple)
            decoder_inputs = _pad_length(decoder_inputs, pad_to_multiple)
            labels = _pad_length(labels, pad_to_multiple)
        return {"encoder_inputs": encoder_inputs, "decoder_inputs": decoder_inputs}, labels

    return dataset.map(to_model_inputs, num_parallel_calls=AUTOTUNE)


class DataPosition:
    """Where an epoch dataset (`make_epoch_dataset`) starts: the epoch (its shuffle order) and batches to skip.

    Both are `tf.Variable`s that the dataset reads each time an iterator starts, so one dataset object given to
    `fit()` yields epoch `e`'s order in epoch `e` (set `epoch` before the epoch's iterator is created, as a
    callback's `on_epoch_begin` does) and a resumed run can start in the middle of an epoch (`skip`).

    Example:

    >>> position = DataPosition()
    >>> position.set(epoch=3, skip=10)
    >>> int(position.epoch.numpy()), int(position.skip.numpy())
    (3, 10)
    """

    def __init__(self):
        self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="data_epoch")
        self.skip = tf.Variable(0, dtype=tf.int64, trainable=False, name="data_skip")

    def set(self, epoch, skip=0):
        self.epoch.assign(int(epoch))
        self.skip.assign(int(skip))


def make_epoch_dataset(pairs_fn, source_tokenizer, target_tokenizer, position=None, seed=0, shuffle=True,
                       shuffle_buffer=100_000, batch_size=64, max_length=64, bucket=True, token_budget=None,
                       pad_to_multiple=8, same_length=False, drop_remainder=False, shard=None,
                       tokenize_batch_size=1024, endless=False):
    """The training batches of one epoch, streamed: memory bounded by `shuffle_buffer`, whatever the corpus size.

    Each iterator reads `position` (a `DataPosition`): the epoch's seed is `seed * 1000003 + epoch`, which
    shuffles the shard order (`pairs_fn` gets it) and the pairs (`block_shuffle`, in blocks of `shuffle_buffer`
    untokenized pairs); then the pairs are tokenized in the graph, bucketed and padded as `make_dataset` does,
    and the first `position.skip` batches are skipped. Every run with the same seed sees the same batches in the
    same order, so a run resumed at `(epoch, skip)` continues exactly where it stopped, and the processes of a
    multi-host run (which each run this pipeline) agree on every batch.

    Args:
        pairs_fn: `pairs_fn(seed)` -> a `tf.data.Dataset` of `(source, target)` string pairs for one pass
            (`seed` an int64 tensor, e.g. `lambda seed: file_pairs(src_files, tgt_files, seed=seed)`).
        source_tokenizer: `SubwordTokenizer` of the source language.
        target_tokenizer: `SubwordTokenizer` of the target language (may be the same object).
        position: a `DataPosition`; `None` always reads epoch 0 from its start.
        seed: base seed of the shuffles.
        shuffle: shuffle pairs within `shuffle_buffer` (and shards, by `pairs_fn`).
        shuffle_buffer: pairs held for shuffling (bounded memory; a corpus smaller than it is fully shuffled).
        shard: `(index, count)`: keep rows `[index * B / count, (index + 1) * B / count)` of every batch of `B`
            rows, padded with all-padding rows (which get no loss) up to a multiple of `count`: the process-local
            part of a global batch.
        endless: one iterator reads pass after pass (`position.epoch`, then the next, ...; `position.skip`
            batches skipped in the first only), for `fit(steps_per_epoch=...)`, whose epochs are not data passes.
        Other arguments: as in `make_dataset`.

    Returns:
        A `tf.data.Dataset` of `({"encoder_inputs", "decoder_inputs"}, labels)` batches, prefetched.

    Example:

    >>> from keras_transformer.data import make_synthetic_corpus, train_tokenizers
    >>> corpus = make_synthetic_corpus(64, seed=0)
    >>> src, tgt = train_tokenizers(corpus, vocab_size=300, verbose=0)
    >>> pairs = corpus.to_dataset()
    >>> position = DataPosition()
    >>> ds = make_epoch_dataset(lambda seed: pairs, src, tgt, position=position, batch_size=16, max_length=32)
    >>> first = [labels.numpy() for _, labels in ds]
    >>> position.set(epoch=0, skip=1)
    >>> resumed = [labels.numpy() for _, labels in ds]
    >>> len(resumed) == len(first) - 1 and bool((resumed[0] == first[1]).all())
    True
    """
    if max_length < 3:
        raise ValueError(f"max_length must be at least 3 ([START] token [END]), got {max_length}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    if shuffle_buffer < 1:
        raise ValueError(f"shuffle_buffer must be positive, got {shuffle_buffer}")
    fixed = position is None
    base_seed = tf.constant(int(seed) * 1_000_003, tf.int64)

    def one_pass(epoch, skip):
        epoch_seed = base_seed + epoch
        pairs = pairs_fn(epoch_seed)
        if shuffle:
            pairs = block_shuffle(pairs, shuffle_buffer, epoch_seed)
        dataset = _tokenize(pairs, source_tokenizer, target_tokenizer, max_length, tokenize_batch_size)
        dataset = _batch(dataset, batch_size, max_length, bucket, token_budget, pad_to_multiple, same_length,
                         drop_remainder)
        return dataset.skip(skip)

    def passes(_):
        zero = tf.constant(0, tf.int64)
        start, skip = (zero, zero) if fixed else (position.epoch.read_value(), position.skip.read_value())
        if not endless:
            return one_pass(start, skip)
        return tf.data.Dataset.counter(start).flat_map(
            lambda epoch: one_pass(epoch, tf.where(epoch == start, skip, zero)))

    dataset = tf.data.Dataset.from_tensors(tf.constant(0, tf.int64)).flat_map(passes)
    if shard is not None:
        dataset = dataset.map(lambda inputs, labels: _shard_rows((inputs, labels), *shard))
    return dataset.prefetch(AUTOTUNE)


def block_shuffle(dataset, block_size, seed):
    """Shuffles a stream in blocks of `block_size` elements, each permuted by a stateless seed `(seed, block)`.

    Memory stays bounded by one block; a stream shorter than a block is fully shuffled. Unlike
    `Dataset.shuffle`, the order is a pure function of `seed`, which may be a tensor (an epoch's seed read from a
    variable), whatever TensorFlow's global seed is.

    Example:

    >>> ds = block_shuffle(tf.data.Dataset.range(6), 3, tf.constant(7, tf.int64))
    >>> sorted(int(x) for x in ds) == list(range(6))
    True
    """
    seed = tf.cast(seed, tf.int64)

    def permute(block_index, block):
        rows = tf.shape(tf.nest.flatten(block)[0])[0]
        order = tf.random.experimental.stateless_shuffle(tf.range(rows), seed=tf.stack([seed, block_index]))
        return tf.nest.map_structure(lambda x: tf.gather(x, order), block)

    return dataset.batch(block_size).enumerate().map(permute).unbatch()


def _shard_rows(batch, index, count):
    """Rows `[index * n, (index + 1) * n)` of every tensor, after padding the rows to `count * n` with zeros."""
    rows = tf.shape(tf.nest.flatten(batch)[0])[0]
    per_shard = (rows + count - 1) // count

    def take(x):
        x = tf.pad(x, [[0, per_shard * count - rows], [0, 0]])
        return x[index * per_shard : (index + 1) * per_shard]

    return tf.nest.map_structure(take, batch)


def duplicate_rows(dataset):
    """Each batch `(inputs, labels)` stacked on itself: row `i + n` repeats row `i` of an `n`-row batch.

    R-Drop's input (`MaskedSparseCategoricalCrossentropy(rdrop=...)`): the two copies of a sentence pass through
    the model with different dropout masks in one step, and the loss pulls their predictions together.
    """
    return dataset.map(lambda inputs, labels: tf.nest.map_structure(lambda x: tf.concat([x, x], axis=0),
                                                                    (inputs, labels)),
                       num_parallel_calls=AUTOTUNE)


def with_known_length(dataset, batches):
    """`dataset` with its length asserted: Keras then knows an epoch's length before it ends (a progress bar total)."""
    return dataset.apply(tf.data.experimental.assert_cardinality(batches))


def count_batches(dataset):
    """The number of batches in one pass over a finite dataset (tokenizes the whole pass once)."""
    return int(dataset.reduce(np.int64(0), lambda count, _: count + 1))


def with_batch_count(dataset):
    """Count the batches of one pass over a finite `dataset`; return it with that length asserted, and the count.

    `make_dataset`'s bucketed batches have no static length, so Keras would learn an epoch's length only by running
    out of data (its first progress bar has no total or ETA, and it warns "Your input ran out of data" at the end).
    The count is the same every epoch: reshuffling changes which pairs share a batch, not how many pairs fall in each
    length bucket. The counting pass also fills `make_dataset`'s cache, so the first epoch does not tokenize again.

    Example:

    >>> dataset, batches = with_batch_count(tf.data.Dataset.range(10).batch(4))
    >>> batches, int(dataset.cardinality())
    (3, 3)
    """
    batches = count_batches(dataset)
    return with_known_length(dataset, batches), batches


def _pad_to(batch, length, multiple):
    padded = (length + multiple - 1) // multiple * multiple
    return tf.pad(batch, [[0, 0], [0, padded - tf.shape(batch)[1]]])


def _pad_length(batch, multiple):
    length = tf.shape(batch)[1]
    padded = (length + multiple - 1) // multiple * multiple
    return tf.pad(batch, [[0, 0], [0, padded - length]])


def measure_throughput(dataset, steps=None, warmup_steps=1):
    """Measures how fast iterating `dataset` produces target tokens (the input-pipeline ceiling).

    Training can go no faster than this; compare it with the training throughput. With `shuffle` over a whole
    corpus the first batch waits until every pair is tokenized, so `warmup_steps` keeps that start-up out of the
    figure; once cached, later epochs skip tokenization altogether.

    Args:
        dataset: a dataset from `make_dataset`.
        steps: batches to time (after the warm-up); `None` times one full pass.
        warmup_steps: batches consumed before timing starts (pipeline start-up, first tokenizer calls).

    Returns:
        Target tokens (non-padding labels) per second, a float.

    Example:

    >>> tokens_per_second = measure_throughput(ds, steps=50)  # doctest: +SKIP
    """
    iterator = iter(dataset)
    for _ in range(warmup_steps):
        try:
            next(iterator)
        except StopIteration:
            break
    tokens = 0
    batches = 0
    start = time.perf_counter()
    for _, labels in iterator:
        tokens += int(np.count_nonzero(labels.numpy()))
        batches += 1
        if steps is not None and batches >= steps:
            break
    elapsed = time.perf_counter() - start
    if batches == 0:
        raise ValueError("the dataset produced no batches to time (is it shorter than warmup_steps?)")
    return tokens / max(elapsed, 1e-9)


def padding_fraction(dataset, steps=None):
    """The fraction of padding positions in `labels` and `encoder_inputs` over `steps` batches (a diagnostic).

    Returns:
        `(source_fraction, target_fraction)`.
    """
    total = np.zeros(2)
    pads = np.zeros(2)
    for step, (inputs, labels) in enumerate(dataset):
        if steps is not None and step >= steps:
            break
        for i, batch in enumerate((inputs["encoder_inputs"].numpy(), labels.numpy())):
            total[i] += batch.size
            pads[i] += np.count_nonzero(batch == 0)
    return tuple(float(x) for x in pads / np.maximum(total, 1))
