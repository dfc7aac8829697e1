"""The batches a training run reads: tokenized, batched by length, sharded across processes, doubled for R-Drop;
and the epoch's length."""

import typing

from keras_transformer.data.lengths import count_too_long
from keras_transformer.data.lengths import token_room
from keras_transformer.data.pipeline import DataPosition
from keras_transformer.data.pipeline import count_batches
from keras_transformer.data.pipeline import duplicate_rows
from keras_transformer.data.pipeline import make_epoch_dataset
from keras_transformer.data.pipeline import with_batch_count

# Up to this many pairs, one counting pass (a tokenization of the corpus) gives the exact epoch length.
EXACT_COUNT_LIMIT = 500_000


def steps_per_epoch(dataset, num_pairs, training_config, verbose):
    """`(batches per epoch, exact)`: counted for corpora up to `EXACT_COUNT_LIMIT` pairs, else estimated."""
    if training_config.steps_per_epoch:
        return training_config.steps_per_epoch, True
    if num_pairs <= EXACT_COUNT_LIMIT:
        return count_batches(dataset), True
    steps = max(1, num_pairs // training_config.batch_size)
    if verbose:
        print(f"About {steps:,} batches per epoch (estimated from {num_pairs:,} pairs; Keras counts them in the "
              "first epoch)")
    return steps, False


class TrainingData(typing.NamedTuple):
    """What `fit` reads: the training and validation batches and the epoch's length."""

    train: object  # a tf.data.Dataset
    val: object  # a tf.data.Dataset, or None
    steps: int  # batches per epoch
    exact: bool  # `steps` was counted, not estimated
    position: DataPosition  # where the training batches are (the checkpoints record it)
    pass_steps: int = None  # with `steps_per_epoch`: the batches of one pass over the data (epochs are not passes)
    record: dict = None  # the pairs read, kept and skipped, for the run's config.json


def skipped_too_long(source, tokenizers, max_length, what, verbose):
    """The pairs of `source` that do not fit `max_length` (one tokenization pass), told to the user; `None` when
    the corpus is too large to count them before training (they are skipped all the same)."""
    if source.num_pairs > EXACT_COUNT_LIMIT:
        if verbose:
            print(f"Pairs that do not fit max_length {max_length} are skipped ({what}: not counted above "
                  f"{EXACT_COUNT_LIMIT:,} pairs)")
        return None
    import tensorflow as tf

    count = count_too_long(source.pairs_fn(tf.constant(0, tf.int64)), *tokenizers, max_length)
    if count == source.num_pairs:
        rooms = token_room(*tokenizers, max_length)
        raise ValueError(f"max_length (--max-length) = {max_length}: no {what} pair fits (at most {rooms[0]} source "
                         f"and {rooms[1]} target subword tokens); raise --max-length")
    if count and verbose:
        print(f"Skipping {count:,} of {source.num_pairs:,} {what} pairs whose source or target does not fit "
              f"max_length {max_length} (they are skipped, not cut)")
    return count


def training_data(source, val_source, tokenizers, model_config, training_config, shard, verbose):
    """The training and validation batches of this process (`shard`: its rows of each global batch, or None)."""
    batching = dict(
        batch_size=training_config.batch_size,
        max_length=model_config.max_length,
        token_budget=training_config.token_budget,
        # One shape per length bucket (and full batches only in training): XLA compiles the train step once
        # per bucket instead of once per (batch, source, target) shape.
        same_length=bool(training_config.jit_compile),
    )
    position = DataPosition()

    def training_batches(shard=None, endless=False):
        return make_epoch_dataset(
            source.pairs_fn, *tokenizers, position=position, seed=training_config.seed,
            shuffle_buffer=training_config.shuffle_buffer, shard=shard,
            drop_remainder=bool(training_config.jit_compile) and source.num_pairs >= 4 * training_config.batch_size,
            endless=endless, **batching,
        )

    record = dict(source.record, skipped_over_max_length=skipped_too_long(
        source, tokenizers, model_config.max_length, "training", verbose))
    val_ds = None
    if val_source is not None:
        record["validation"] = dict(val_source.record, skipped_over_max_length=skipped_too_long(
            val_source, tokenizers, model_config.max_length, "validation", verbose))
        val_ds = make_epoch_dataset(val_source.pairs_fn, *tokenizers, shuffle=False, shard=shard, **batching)
        if val_source.num_pairs <= EXACT_COUNT_LIMIT:
            # A known length: the first validation pass ends without Keras's "Your input ran out of data".
            val_ds, _ = with_batch_count(val_ds)
    # The epoch length is counted on the whole global batches; each process then reads its rows of them.
    whole_batches = training_batches()
    steps, exact = steps_per_epoch(whole_batches, source.num_pairs, training_config, verbose)
    pass_steps = None
    if training_config.steps_per_epoch:
        # Epochs of a fixed length over an endless stream of passes: a checkpoint's position in the data is its
        # global batch counted in passes, so the length of one pass is counted (one tokenization of the corpus).
        if verbose and source.num_pairs > EXACT_COUNT_LIMIT:
            print(f"Counting the batches of one pass over {source.num_pairs:,} pairs (steps_per_epoch resumes at a "
                  "position in the data)")
        pass_steps = count_batches(whole_batches)
        if pass_steps == 0:
            raise ValueError("the training data makes no batch (no pair fits max_length?)")
    train_ds = training_batches(shard, endless=bool(training_config.steps_per_epoch))
    if training_config.rdrop:
        # R-Drop: every batch twice, so the loss compares two dropout passes of each example. Validation
        # batches too: without dropout the copies agree, and the validation loss is the plain one.
        train_ds = duplicate_rows(train_ds)
        val_ds = duplicate_rows(val_ds) if val_ds is not None else None
    return TrainingData(train_ds, val_ds, steps, exact, position, pass_steps, record)
