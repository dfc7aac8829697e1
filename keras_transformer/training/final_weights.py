"""The weights a training run ends with, decided the same way whether or not the run was interrupted.

* `patience`: early stopping. Training stops after `patience` epochs without a new best `monitor` value, and the
  run ends with the best epoch's weights (as Keras' `EarlyStopping(restore_best_weights=True)` does);
* `average_last`: the run ends with the average of the last `average_last` epochs' weights (Vaswani et al., 2017,
  section 6.1; Popel and Bojar, 2018);
* both: the average of the `average_last` epochs that end with the best one.

The state lives on disk, so that a resumed run decides as an uninterrupted one would: the best value and the
epochs since are read back from `history.json` (`HistoryLogger` writes each epoch's record before this callback
runs), and each epoch's weights that a final average may still need are kept under `checkpoint/epochs/`, written
atomically before the epoch's checkpoint (a kill between the two repeats the epoch and rewrites the file).
"""

import math
import os
import re

import keras
import numpy as np

from keras_transformer.atomic import atomic_path
from keras_transformer.runs.layout import CHECKPOINT_DIR

SNAPSHOT_DIR = os.path.join(CHECKPOINT_DIR, "epochs")
_SNAPSHOT = re.compile(r"epoch-(\d+)\.npz$")


class FinalWeights(keras.callbacks.Callback):
    """Keeps what early stopping and weight averaging need at each epoch end; `finish()` loads the final weights.

    Put it after the history logger and before the resumable checkpoint. `finish()` is called once, after the
    last `fit()` of the run (a resumed epoch is completed by a `fit()` of its own, so Keras' `on_train_end` comes
    more than once).

    Args:
        run_dir: where the snapshots are written (`run_dir/checkpoint/epochs/`).
        average_last: the number of epochs to average (1: no averaging).
        patience: epochs without improvement of `monitor` before stopping; `None` never stops early.
        monitor: the logged metric that early stopping watches (lower is better).
        records: the per-epoch records of the epochs a resumed run finished (`history.json`), else `[]`.
        read_dir: where a resumed run's snapshots are (process 0's run directory); `run_dir` when `None`.
    """

    def __init__(self, run_dir, average_last=1, patience=None, monitor="val_loss", records=(), read_dir=None):
        super().__init__()
        if int(average_last) < 1:
            raise ValueError(f"average_last must be at least 1, got {average_last}")
        self.directory = os.path.join(run_dir, SNAPSHOT_DIR)
        self.read_directory = os.path.join(read_dir or run_dir, SNAPSHOT_DIR)
        self.average_last = int(average_last)
        self.patience = None if patience is None else int(patience)
        self.monitor = monitor
        self.best, self.best_epoch, self.wait, self.last_epoch = math.inf, None, 0, 0
        for record in records:  # epochs are 1-based in the history and here
            self._observe(int(record["epoch"]), record.get(monitor))

    @property
    def stopped(self):
        """Early stopping's patience has run out: no more epochs to train."""
        return self.patience is not None and self.best_epoch is not None and self.wait >= self.patience

    def _observe(self, epoch, value):
        self.last_epoch = epoch
        if value is None or self.patience is None:
            return
        if value < self.best:
            self.best, self.best_epoch, self.wait = float(value), epoch, 0
        else:
            self.wait += 1

    def _final_epoch(self):
        return self.best_epoch if self.patience is not None and self.best_epoch is not None else self.last_epoch

    def _needed(self):
        """The epochs whose weights a final average could still use (a later best epoch needs later ones only)."""
        return range(max(1, self._final_epoch() - self.average_last + 1), self.last_epoch + 1)

    def on_epoch_end(self, epoch, logs=None):
        self._observe(epoch + 1, (logs or {}).get(self.monitor))
        if self.average_last == 1 and self.patience is None:
            return
        os.makedirs(self.directory, exist_ok=True)
        with atomic_path(os.path.join(self.directory, f"epoch-{epoch + 1}.npz")) as temporary:
            with open(temporary, "wb") as f:
                np.savez(f, *self.model.get_weights())
        needed = self._needed()
        for name in os.listdir(self.directory):
            match = _SNAPSHOT.match(name)
            if match and int(match.group(1)) not in needed:
                os.remove(os.path.join(self.directory, name))
        if self.stopped:
            self.model.stop_training = True

    def finish(self, model, verbose=0):
        """Loads the run's final weights into `model`: the best epoch's, the average, or (neither) leaves them."""
        final = self._final_epoch()
        if final is None or (final == self.last_epoch and self.average_last == 1):
            return
        epochs = [e for e in range(final - self.average_last + 1, final + 1) if e >= 1]
        snapshots = []
        for epoch in epochs:
            for directory in (self.directory, self.read_directory):
                path = os.path.join(directory, f"epoch-{epoch}.npz")
                if os.path.exists(path):
                    with np.load(path) as saved:
                        snapshots.append([saved[f"arr_{i}"] for i in range(len(saved.files))])
                    break
            else:
                raise FileNotFoundError(f"the weights of epoch {epoch} are missing from {self.directory}")
        model.set_weights([np.mean(ws, axis=0).astype(ws[0].dtype) for ws in zip(*snapshots)])
        if verbose:
            what = f"the average of epochs {epochs[0]}-{epochs[-1]}" if len(epochs) > 1 else f"epoch {final}"
            print(f"Final weights: {what}" + (f" (the best {self.monitor})" if self.patience is not None else ""))
