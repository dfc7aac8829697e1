"""Callbacks for a training run: checkpoints, resumable backups, TensorBoard, early stopping, history logs."""

import csv
import io
import json
import math
import os
import statistics
import time

import keras

from keras_transformer.atomic import write_json
from keras_transformer.atomic import write_text
from keras_transformer.training.model_checkpoints import BestModelCheckpoint
from keras_transformer.training.model_checkpoints import LastModelCheckpoint


def _clock():
    """Seconds on a monotonic clock (tests replace it)."""
    return time.monotonic()


class HistoryLogger(keras.callbacks.Callback):
    """Writes the per-epoch logs to a JSON file and a CSV file after every epoch.

    Each record also holds `epoch_seconds`, the wall time of the epoch (training and validation).
    Records are keyed by epoch number. A run resumed with `BackupAndRestore` passes `resume_epoch` (the epoch the
    backup restores), keeps the records up to it and continues the same files; a new run starts them afresh.

    Args:
        json_path: the JSON file: `{"epochs": [{"epoch": 1, "loss": ..., ...}, ...]}`.
        csv_path: the CSV file (one row per epoch), or `None`.
        resume_epoch: keep the existing records of epochs `<= resume_epoch`; `None` or 0 starts afresh.

    Example:

    >>> logger = HistoryLogger("run/history.json", "run/history.csv")
    """

    def __init__(self, json_path, csv_path=None, resume_epoch=None):
        super().__init__()
        self.json_path = json_path
        self.csv_path = csv_path
        self.resume_epoch = resume_epoch
        self.records = {}
        self._epoch_started = None

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_started = _clock()

    def on_train_begin(self, logs=None):
        if self.records:  # a second fit() of the same run (a resumed epoch completed first): keep going
            return
        if self.resume_epoch:
            for record in read_records(self.json_path):
                if int(record["epoch"]) <= self.resume_epoch:
                    self.records[int(record["epoch"])] = record

    def on_epoch_end(self, epoch, logs=None):
        record = {"epoch": epoch + 1}
        for key, value in (logs or {}).items():
            try:
                record[key] = float(value)
            except (TypeError, ValueError):
                continue
        learning_rate = _current_learning_rate(self.model)
        if learning_rate is not None and "learning_rate" not in record:
            record["learning_rate"] = learning_rate
        if self._epoch_started is not None:
            record["epoch_seconds"] = _clock() - self._epoch_started
        self.records[epoch + 1] = record
        self._write()

    def history(self):
        """The records as a Keras-style history dict `{metric: [value per epoch]}`."""
        return records_to_history([self.records[k] for k in sorted(self.records)])

    def _write(self):
        records = [self.records[k] for k in sorted(self.records)]
        directory = os.path.dirname(self.json_path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        write_json(self.json_path, {"epochs": records}, indent=1)
        if self.csv_path:
            keys = []
            for record in records:
                keys.extend(k for k in record if k not in keys)
            table = io.StringIO(newline="")
            writer = csv.DictWriter(table, fieldnames=keys)
            writer.writeheader()
            writer.writerows(records)
            write_text(self.csv_path, table.getvalue())


class TimeBudget(keras.callbacks.Callback):
    """Stops training before a wall-clock budget runs out, at an epoch end when it can.

    After each epoch it projects the next one to last as long as the latest (so the first epoch's XLA compiles
    do not count twice) and stops if that would overrun the budget; mid-epoch, it stops as soon as the budget is
    spent. Either way `fit()` returns normally, so the checkpoints, the history and weight averaging see a
    finished run.

    Args:
        max_seconds: the budget for training (including validation), in seconds.
        spent_seconds: time already spent before this `fit()` call (a resumed run).
        verbose: print why training stopped.
        past_epoch_seconds: the wall times of the epochs before this `fit()` call, when known
            (`spent_seconds` defaults to their sum).

    Attributes:
        epoch_seconds: the wall time of every epoch so far, those of `past_epoch_seconds` first
            (`FitCosineToBudget` reads it).

    Example:

    >>> budget = TimeBudget(90 * 60)  # model.fit(..., epochs=100, callbacks=[budget]) trains at most 90 minutes
    """

    def __init__(self, max_seconds, spent_seconds=None, verbose=1, past_epoch_seconds=()):
        super().__init__()
        if not max_seconds or max_seconds <= 0:
            raise ValueError(f"max_seconds must be a positive number of seconds, got {max_seconds!r}")
        self.max_seconds = float(max_seconds)
        self.epoch_seconds = [float(s) for s in past_epoch_seconds]
        self.spent_seconds = float(sum(self.epoch_seconds) if spent_seconds is None else spent_seconds)
        self.verbose = verbose
        self.stopped_reason = None
        self._started = None
        self._epoch_started = None

    def elapsed(self):
        """Seconds of training so far, including `spent_seconds`."""
        return self.spent_seconds + (_clock() - self._started if self._started is not None else 0.0)

    def on_train_begin(self, logs=None):
        self._started = _clock()
        self.stopped_reason = None
        if self.spent_seconds >= self.max_seconds:
            self._stop(f"the time budget ({self.max_seconds / 60:.1f} min) was already spent before this run")

    def on_train_end(self, logs=None):
        # A later fit() of the same run (the trainer completes a resumed epoch in its own fit) continues the count.
        self.spent_seconds = self.elapsed()
        self._started = None

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_started = _clock()

    def on_train_batch_end(self, batch, logs=None):
        if self.stopped_reason is None and self.elapsed() >= self.max_seconds:
            self._stop(f"the time budget ({self.max_seconds / 60:.1f} min) ran out in the middle of an epoch")

    def on_epoch_end(self, epoch, logs=None):
        last_epoch = _clock() - self._epoch_started
        self.epoch_seconds.append(last_epoch)
        if self.stopped_reason is not None:
            return
        elapsed = self.elapsed()
        if elapsed + last_epoch > self.max_seconds:
            self._stop(
                f"another epoch (~{last_epoch / 60:.1f} min) would overrun the time budget "
                f"({elapsed / 60:.1f} of {self.max_seconds / 60:.1f} min used) after epoch {epoch + 1}"
            )

    def _stop(self, reason):
        self.stopped_reason = reason
        self.model.stop_training = True
        if self.verbose:
            print(f"\nStopping: {reason}.", flush=True)


class FitCosineToBudget(keras.callbacks.Callback):
    """Ends a cosine decay where a `TimeBudget` will end training, instead of at a fixed epoch count.

    With a wall-clock budget the number of epochs that fit depends on the machine and the day, and a cosine
    decay sized for more epochs than fit stops with the learning rate well above zero. After each epoch this
    estimates the epoch time (the median of the epochs `budget` has timed, leaving out the first, which also
    tokenizes and compiles), counts the epochs that still fit in the budget, and moves the schedule's horizon to
    the end of the last of them (never past `max_epochs`): from the current step the learning rate goes on,
    without a jump, to zero there. Training stops at that epoch end. Moving the horizon out again needs the extra
    epochs to fit with `growth_margin` to spare (an epoch time near the boundary would otherwise move it back and
    forth, and an epoch that then does not fit would end training above zero). Once an epoch end reaches the horizon the
    learning rate is zero, so the horizon is not moved out again even if a faster epoch leaves time for another.

    Args:
        schedule: a `WarmupCosineDecay` (what `make_schedule(..., decay="cosine")` returns).
        steps_per_epoch: optimizer steps per epoch.
        budget: the run's `TimeBudget`, before this callback in the callback list (its epoch times are read
            here; with `past_epoch_seconds`, it also starts a resumed run's estimate).
        max_epochs: the configured epochs (the horizon never goes past them).
        resume_learning_rate: the learning rate logged at the end of the budget's past epochs: the resumed
            decay goes on from it (the schedule's moved horizon is not part of the backup).
        growth_margin: moving the horizon later needs the epochs to fit at `(1 + growth_margin)` times the
            estimated epoch time.
        verbose: print each change of the horizon.

    Example:

    >>> budget = TimeBudget(90 * 60)  # doctest: +SKIP
    >>> fit = FitCosineToBudget(model.optimizer.learning_rate_schedule, 450, budget, 20)  # doctest: +SKIP
    """

    def __init__(self, schedule, steps_per_epoch, budget, max_epochs, resume_learning_rate=None, growth_margin=0.1,
                 verbose=1):
        super().__init__()
        if not hasattr(schedule, "set_total_steps"):
            raise TypeError(f"FitCosineToBudget needs a schedule with a movable horizon (WarmupCosineDecay), "
                            f"got {type(schedule).__name__}")
        self.schedule = schedule
        self.steps_per_epoch = int(steps_per_epoch)
        self.budget = budget
        self.max_epochs = int(max_epochs)
        finite = resume_learning_rate is not None and math.isfinite(float(resume_learning_rate))
        self.resume_learning_rate = float(resume_learning_rate) if finite else None
        self.growth_margin = float(growth_margin)
        self.verbose = verbose
        self.horizon = None

    def on_train_begin(self, logs=None):
        if self.budget.epoch_seconds:  # resuming: fit the horizon before the first resumed step
            self._fit(len(self.budget.epoch_seconds), learning_rate=self.resume_learning_rate)
            self.resume_learning_rate = None  # a later fit() of the same run goes on from the schedule as it is

    def on_epoch_end(self, epoch, logs=None):
        self._fit(epoch + 1)
        if self.horizon is not None and epoch + 1 >= self.horizon and not self.model.stop_training:
            self.model.stop_training = True
            if self.verbose:
                print(f"\nStopping: the cosine decay ended with epoch {epoch + 1}, the last that fits the time budget.",
                      flush=True)

    def estimated_epoch_seconds(self):
        """The median epoch time so far, leaving out the first epoch when there are others."""
        times = self.budget.epoch_seconds
        return statistics.median(times[1:] or times)

    def _fit(self, done, learning_rate=None):
        per_epoch = self.estimated_epoch_seconds()
        remaining = self.budget.max_seconds - self.budget.elapsed()

        def fitting(seconds_each):
            return done + max(0, int(remaining // seconds_each)) if seconds_each > 0 else self.max_epochs

        fits = fitting(per_epoch)
        if self.horizon is not None and done >= self.horizon:
            # The decay has ended: the learning rate is 0 and a later horizon would go on from 0, so an epoch
            # more would not train. Training stops here instead.
            fits = self.horizon
        elif self.horizon is not None and fits > self.horizon:
            fits = max(self.horizon, fitting(per_epoch * (1.0 + self.growth_margin)))
        horizon = max(done, min(self.max_epochs, fits))
        # The decay must end after the warm-up (WarmupCosineDecay requires it).
        steps = max(horizon * self.steps_per_epoch, self.schedule.warmup_steps + 1)
        if horizon != self.horizon or learning_rate is not None:
            step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
            self.schedule.set_total_steps(steps, step=step, learning_rate=learning_rate)
            if self.verbose:
                print(f"\nCosine decay now ends with epoch {horizon} (step {steps}): ~{per_epoch / 60:.1f} min per "
                      f"epoch, {max(remaining, 0) / 60:.1f} of {self.budget.max_seconds / 60:.1f} min left.",
                      flush=True)
        self.horizon = horizon


def _current_learning_rate(model):
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        return None
    try:
        value = float(keras.ops.convert_to_numpy(optimizer.learning_rate))
    except Exception:  # noqa: BLE001 - a custom optimizer without a readable learning rate
        return None
    return value if math.isfinite(value) else None


def read_records(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        try:
            return list(json.load(f).get("epochs", []))
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{error.lineno}: expected the JSON written by HistoryLogger "
                             f"({error.msg})") from None


def _backup_epoch(backup_dir):
    """The epoch a `BackupAndRestore` directory will restore, or `None` when there is no backup."""
    path = os.path.join(backup_dir, "training_metadata.json")
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return int(json.load(f)["epoch"])
    except (ValueError, KeyError, TypeError):
        return None


def records_to_history(records):
    """Turns a list of per-epoch dicts into `{metric: [values]}` (missing values become `nan`)."""
    keys = []
    for record in records:
        keys.extend(k for k in record if k not in keys and k != "epoch")
    return {key: [float(record.get(key, float("nan"))) for record in records] for key in keys}


def load_history(path):
    """Reads a `history.json` written by `HistoryLogger` as `{metric: [values]}`."""
    return records_to_history(read_records(path))


def make_callbacks(output_dir, patience=None, tensorboard=True, backup=True, monitor="val_loss", backup_freq="epoch",
                   history=True, max_minutes=None, cosine_schedule=None, steps_per_epoch=None, max_epochs=None,
                   resume_epoch=None, checkpoints=True):
    """The callbacks of a training run, all writing under `output_dir`.

    * `best.keras`: the best model by `monitor` (`"loss"` when there is no validation data);
    * `last.keras`: the model at the end of the latest epoch;
    * `backup/`: `keras.callbacks.BackupAndRestore`; rerunning the same `fit()` after a crash or a kill resumes
      from the last backup (weights, optimizer state and step count), and the directory is removed when
      training ends normally. Keras restores at epoch boundaries: a run killed mid-epoch repeats that epoch from
      its start, with the optimizer at the step where the epoch began, so it ends at the same step count as an
      uninterrupted run. Use shorter epochs (`steps_per_epoch`) to lose less work;
    * `logs/`: TensorBoard;
    * `history.json` / `history.csv`: per-epoch metrics and learning rate (`HistoryLogger`), continued when
      resuming from a backup, started afresh otherwise;
    * early stopping after `patience` epochs without improvement, restoring the best weights;
    * `TimeBudget`: with `max_minutes`, training stops before that much wall time is spent (counting the epochs
      before an interruption, from `history.json`);
    * `FitCosineToBudget`: with `max_minutes` and a `cosine_schedule`, the decay ends with the last epoch that
      fits (a resumed run goes on from the learning rate logged in `history.json`).

    Args:
        output_dir: directory of the run (created if needed).
        patience: epochs without improvement of `monitor` before stopping; `None` never stops early.
        tensorboard: add a TensorBoard callback.
        backup: add `BackupAndRestore`.
        monitor: metric for the best checkpoint and early stopping.
        backup_freq: `"epoch"`, or back up every this many batches (Keras still resumes at the epoch start).
        history: add the `HistoryLogger`.
        max_minutes: wall-clock training budget in minutes; `None` for none.
        cosine_schedule: the run's `WarmupCosineDecay`, to fit to `max_minutes`; `None` leaves the schedule alone.
        steps_per_epoch: optimizer steps per epoch (with `cosine_schedule`).
        max_epochs: the `epochs` of `fit()` (with `cosine_schedule`).
        resume_epoch: with `backup=False`, the epochs a resumed run already finished (its own checkpoint, e.g.
            `keras_transformer.runs.ResumableCheckpoint`, restores them): history and budget continue from them.
        checkpoints: add the `best.keras` / `last.keras` checkpoints.

    Returns:
        A list of callbacks for `model.fit(callbacks=...)`.

    Example:

    >>> callbacks = make_callbacks("runs/de-en", patience=3)  # doctest: +SKIP
    >>> model.fit(train_ds, validation_data=val_ds, epochs=20, callbacks=callbacks)  # doctest: +SKIP
    """
    os.makedirs(output_dir, exist_ok=True)
    backup_dir = os.path.join(output_dir, "backup")
    history_path = os.path.join(output_dir, "history.json")
    if backup:
        resume_epoch = _backup_epoch(backup_dir)
    # When resuming, the best checkpoint must beat the best value logged before the interruption.
    best_so_far = None
    if resume_epoch and monitor.endswith("loss"):
        values = [r[monitor] for r in read_records(history_path) if r["epoch"] <= resume_epoch and monitor in r]
        best_so_far = min(values) if values else None
    callbacks = []
    if backup:
        # First, so that the restored state is in place before any other callback's on_train_begin.
        callbacks.append(keras.callbacks.BackupAndRestore(backup_dir=backup_dir, save_freq=backup_freq))
    if checkpoints:
        callbacks.append(BestModelCheckpoint(os.path.join(output_dir, "best.keras"), monitor=monitor,
                                             initial_value_threshold=best_so_far))
        callbacks.append(LastModelCheckpoint(os.path.join(output_dir, "last.keras")))
    if history:
        callbacks.append(HistoryLogger(history_path, os.path.join(output_dir, "history.csv"),
                                       resume_epoch=resume_epoch))
    if tensorboard:
        callbacks.append(keras.callbacks.TensorBoard(log_dir=os.path.join(output_dir, "logs")))
    if patience is not None:
        callbacks.append(keras.callbacks.EarlyStopping(monitor=monitor, patience=int(patience),
                                                       restore_best_weights=True))
    if max_minutes is not None:
        callbacks += _budget_callbacks(history_path, resume_epoch, max_minutes, cosine_schedule, steps_per_epoch,
                                       max_epochs)
    return callbacks


def _budget_callbacks(history_path, resume_epoch, max_minutes, cosine_schedule, steps_per_epoch, max_epochs):
    """`TimeBudget` (counting the epochs logged before a resume), and `FitCosineToBudget` with a cosine schedule."""
    records = [r for r in read_records(history_path) if r["epoch"] <= resume_epoch] if resume_epoch else []
    budget = TimeBudget(float(max_minutes) * 60.0,
                        past_epoch_seconds=[float(r.get("epoch_seconds", 0.0)) for r in records])
    if cosine_schedule is None:
        return [budget]
    if not steps_per_epoch or not max_epochs:
        raise ValueError("cosine_schedule needs steps_per_epoch and max_epochs.")
    return [budget, FitCosineToBudget(cosine_schedule, steps_per_epoch, budget, max_epochs,
                                      resume_learning_rate=records[-1].get("learning_rate") if records else None)]
