"""Resumable checkpoints: after a `kill -9` at any moment, the same training command goes on where it was.

A checkpoint is two files under `run_dir/checkpoint/`:

    step-<S>.weights.h5   the model's weights and the optimizer's state (its step count, Adam's moments)
    checkpoint.json       {"epoch": E, "batch": B, "step": S, "weights": "step-<S>.weights.h5", "metrics": [...],
                           "random_state": [...]}

`epoch` is the epoch in progress (0-based) and `batch` the batches of it already trained (0 at an epoch end);
`metrics` are the running sums of the epoch's metrics (the loss and accuracy that Keras averages over an epoch),
so that the resumed epoch logs the same mean as an uninterrupted one; `random_state` holds the states of the
model's random generators (dropout masks), which weights files do not keep. Each file is written under a temporary
name and renamed into place, the weights first: `checkpoint.json` only ever names a complete weights file, and a
kill between the two writes leaves the previous checkpoint in force.

The data position (`keras_transformer.data.pipeline.DataPosition`) is set from the checkpoint at the start of
each epoch, so the resumed epoch's dataset skips the batches already trained, in the same shuffled order.
"""

import json
import os

import keras
import numpy as np

from keras_transformer.atomic import atomic_path
from keras_transformer.atomic import remove_atomically
from keras_transformer.atomic import write_json
from keras_transformer.runs.layout import CHECKPOINT_DIR

STATE_FILE = "checkpoint.json"


class ResumeError(ValueError):
    """A checkpoint that cannot be resumed from (damaged, or written by a different model)."""


class TrainingDivergedError(ValueError):
    """The loss or the weights became NaN or infinite; nothing non-finite was saved."""


def _checkpoint_dir(run_dir):
    return os.path.join(run_dir, CHECKPOINT_DIR)


def _random_state(model):
    """The model's random generator states (`SeedGenerator`s: in `model.variables`, not in its weights)."""
    weights = {id(variable) for variable in model.weights}
    return [variable for variable in model.variables if id(variable) not in weights]


class ResumableCheckpoint(keras.callbacks.Callback):
    """Writes a resumable checkpoint at every epoch end and every `every_steps` batches; positions the data.

    At each epoch's start it sets `position` (the epoch, and on the epoch being resumed the batches to skip) and,
    when resuming, restores the epoch's running metric sums. Put it after the callbacks that write per-epoch
    files (the history), so that a checkpoint never claims an epoch those files do not have yet.

    Args:
        run_dir: the run directory; checkpoints go to `run_dir/checkpoint/`.
        position: the `DataPosition` the training dataset reads.
        every_steps: also checkpoint every this many batches of an epoch; `None` only at epoch ends.
        resume_state: what `load_checkpoint_state` returned (the run being resumed), or `None`.
        epoch_steps: the batches of an epoch, when known: no mid-epoch checkpoint after its last batch (the
            epoch-end one follows its validation; a resume never starts an epoch with nothing left to train).
        pass_steps: with `fit(steps_per_epoch=...)` over an endless stream (`make_epoch_dataset(endless=True)`),
            the batches of one pass over the data: the data position is the global batch counted in passes.

    Example:

    >>> position = DataPosition()  # doctest: +SKIP
    >>> dataset = make_epoch_dataset(pairs_fn, src_tok, tgt_tok, position=position)  # doctest: +SKIP
    >>> model.fit(dataset, epochs=10, callbacks=[ResumableCheckpoint("runs/de-en", position, 500)])  # doctest: +SKIP
    """

    def __init__(self, run_dir, position, every_steps=None, resume_state=None, epoch_steps=None, pass_steps=None):
        super().__init__()
        if every_steps is not None and int(every_steps) < 1:
            raise ValueError(f"every_steps must be a positive number of batches, got {every_steps}")
        self.run_dir = run_dir
        self.position = position
        self.every_steps = int(every_steps) if every_steps else None
        self.resume_state = resume_state
        self.epoch_steps = epoch_steps
        self.pass_steps = pass_steps
        if pass_steps is not None and not epoch_steps:
            raise ValueError("pass_steps needs epoch_steps (the fixed length of an epoch)")
        self._skipped = 0
        self._epoch = 0
        self._pending_metrics = None
        self.saved = []  # (epoch, batch) of every checkpoint written, for tests and logs

    def on_epoch_begin(self, epoch, logs=None):
        state = self.resume_state
        self._epoch = epoch
        self._skipped = 0
        self._pending_metrics = None
        if state is not None and int(state["epoch"]) == epoch and int(state["batch"]) > 0:
            self._skipped = int(state["batch"])
            self._pending_metrics = state.get("metrics")
        if state is not None and int(state["epoch"]) <= epoch:
            self.resume_state = None  # used once: later epochs start from their beginning
        if self.position is not None and self.pass_steps:
            done = epoch * self.epoch_steps + self._skipped  # global batches trained before this one
            self.position.set(epoch=done // self.pass_steps, skip=done % self.pass_steps)
        elif self.position is not None:
            self.position.set(epoch=epoch, skip=self._skipped)

    def on_train_batch_end(self, batch, logs=None):
        if self._pending_metrics is not None:
            self._restore_metrics(self._pending_metrics)
            self._pending_metrics = None
        done = self._skipped + batch + 1
        if self.every_steps and done % self.every_steps == 0 and done != self.epoch_steps:
            self._save(self._epoch, done)

    def on_epoch_end(self, epoch, logs=None):
        self._save(epoch + 1, 0)

    def _restore_metrics(self, saved):
        # Keras builds the compiled metrics in the first train step, so the sums of the batches trained before the
        # interruption are added after it: every metric here is a running (total, count) pair, so the epoch's mean
        # comes out as in an uninterrupted epoch.
        variables = self.model.metrics_variables
        if len(saved) != len(variables):
            return
        for variable, value in zip(variables, saved):
            variable.assign(keras.ops.convert_to_numpy(variable) + np.asarray(value, dtype=variable.dtype))

    def _save(self, epoch, batch):
        # Never a checkpoint of broken weights: the last good one stays the one a re-run resumes from.
        for variable in self.model.trainable_variables:
            if not np.all(np.isfinite(keras.ops.convert_to_numpy(variable))):
                raise TrainingDivergedError(f"the weights became NaN or infinite ({variable.path}) before the "
                                            "checkpoint " + (f"after epoch {epoch}" if not batch else
                                                             f"at epoch {epoch + 1}, batch {batch}"))
        self.saved.append((epoch, batch))
        directory = _checkpoint_dir(self.run_dir)
        os.makedirs(directory, exist_ok=True)
        step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
        name = f"step-{step}.weights.h5"
        with atomic_path(os.path.join(directory, name)) as temporary:
            self.model.save_weights(temporary)
        metrics = [keras.ops.convert_to_numpy(v).tolist() for v in self.model.metrics_variables] if batch else None
        random_state = [keras.ops.convert_to_numpy(v).tolist() for v in _random_state(self.model)]
        write_json(os.path.join(directory, STATE_FILE), {"epoch": epoch, "batch": batch, "step": step, "weights": name,
                                                         "metrics": metrics, "random_state": random_state})
        for old in os.listdir(directory):  # the previous checkpoint, and leftovers of killed writes
            if old != name and old != STATE_FILE:
                path = os.path.join(directory, old)
                if os.path.isfile(path):
                    os.remove(path)


def load_checkpoint_state(run_dir):
    """The state of `run_dir`'s checkpoint (a dict, see the module's doc), or `None` when there is none.

    Raises:
        ResumeError: `checkpoint.json` is not readable or names a weights file that is missing.
    """
    path = os.path.join(_checkpoint_dir(run_dir), STATE_FILE)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
        for key in ("epoch", "batch", "step", "weights"):
            state[key]  # noqa: B018 - KeyError names the missing field
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ResumeError(f"{path}: not a checkpoint this version can resume from ({error!r}); remove "
                              f"{_checkpoint_dir(run_dir)} to start the run afresh") from None
    state["path"] = os.path.join(_checkpoint_dir(run_dir), state["weights"])
    if not os.path.isfile(state["path"]):
        raise ResumeError(f"{path} names {state['weights']}, which is missing; remove "
                              f"{_checkpoint_dir(run_dir)} to start the run afresh")
    return state


def restore_checkpoint(model, state):
    """Loads a checkpoint's weights and optimizer state into a compiled `model` (built the same way).

    Raises:
        ResumeError: the weights do not fit the model (a different architecture or vocabulary).
    """
    if not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    try:
        model.load_weights(state["path"])
    except (OSError, TypeError) as error:  # h5py: a truncated or damaged file
        raise ResumeError(f"{state['path']}: cannot be read (damaged or truncated?): {error}; remove "
                              f"{os.path.dirname(state['path'])} to start the run afresh") from None
    except (ValueError, KeyError) as error:
        raise ResumeError(f"{state['path']} does not fit this model (were the model settings changed since "
                              f"the run started?): {error}") from None
    saved = state.get("random_state")
    variables = _random_state(model)
    if saved is not None and len(saved) == len(variables):
        for variable, value in zip(variables, saved):
            variable.assign(np.asarray(value, dtype=variable.dtype))
    step = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
    if step != int(state["step"]):
        raise ResumeError(f"{state['path']}: the optimizer state was not restored (step {step}, expected "
                              f"{state['step']})")


def remove_checkpoint(run_dir):
    """Removes `run_dir/checkpoint/` (once the final model is saved there is nothing left to resume), at once: a
    run killed meanwhile has its whole checkpoint, and its re-run finishes from it, or none."""
    remove_atomically(_checkpoint_dir(run_dir))
