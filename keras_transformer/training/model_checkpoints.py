"""The run's model checkpoints (`.keras` files saved atomically at epoch ends) and the guard that keeps non-finite
weights out of every checkpoint.

* `LastModelCheckpoint`: the whole model (`last.keras`) after every epoch.
* `BestModelCheckpoint`: the model (`best.keras`) when the monitored metric improves.
* `StopOnNonFiniteLoss`: stops with `TrainingDivergedError` as soon as the loss is NaN or infinite.
"""

import math
import os

import keras

from keras_transformer.atomic import atomic_path
from keras_transformer.runs.checkpoint import TrainingDivergedError


class LastModelCheckpoint(keras.callbacks.Callback):
    """Saves the whole model (`.keras`) at every epoch end, atomically (a temporary file renamed into place).

    A process killed while saving leaves the previous epoch's file intact (`keras.callbacks.ModelCheckpoint` writes
    the destination in place).

    Args:
        filepath: the `.keras` file.

    Example:

    >>> checkpoint = LastModelCheckpoint("run/last.keras")
    """

    def __init__(self, filepath):
        super().__init__()
        self.filepath = os.fspath(filepath)

    def on_epoch_end(self, epoch, logs=None):
        self._save()

    def _save(self):
        with atomic_path(self.filepath) as temporary:
            self.model.save(temporary)


class BestModelCheckpoint(LastModelCheckpoint):
    """Saves the model when the monitored metric improves, atomically; falls back to another metric when missing.

    Training without validation data has no `val_loss`; rather than never saving, this monitors `fallback`
    (`"loss"`) in that case. A metric that is not finite never counts as an improvement.

    Args:
        filepath: where to save the best model (`.keras`).
        monitor: metric to monitor, e.g. `"val_loss"` (lower is better; `*acc*`/`*accuracy*` higher is better).
        fallback: metric used when `monitor` is not in the epoch logs.
        initial_value_threshold: a value to beat (the best before a resumed run), or `None`.

    Example:

    >>> checkpoint = BestModelCheckpoint("run/best.keras", monitor="val_loss")
    """

    def __init__(self, filepath, monitor="val_loss", fallback="loss", initial_value_threshold=None):
        super().__init__(filepath)
        self.monitor = monitor
        self.fallback = fallback
        self.best = initial_value_threshold

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.monitor not in logs and self.fallback in logs:
            self.monitor = self.fallback
        value = logs.get(self.monitor)
        if value is None or not math.isfinite(float(value)):
            return
        value = float(value)
        higher = "acc" in self.monitor
        if self.best is None or (value > self.best if higher else value < self.best):
            self.best = value
            self._save()


class StopOnNonFiniteLoss(keras.callbacks.Callback):
    """Stops training with `TrainingDivergedError` as soon as the loss is NaN or infinite.

    Unlike `keras.callbacks.TerminateOnNaN` it raises, so that no later callback saves the broken weights: the
    run's last checkpoint (written before the loss broke) stays the one to resume from. Put it first.

    Example:

    >>> guard = StopOnNonFiniteLoss()
    """

    def __init__(self):
        super().__init__()
        self.epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            raise TrainingDivergedError(f"the loss became {float(loss)} at epoch {self.epoch + 1}, batch {batch + 1}")
