import json
import os

import keras
import numpy as np
import pytest

from keras_transformer.training import MaskedAccuracy
from keras_transformer.training import MaskedSparseCategoricalCrossentropy
from keras_transformer.training import load_history
from keras_transformer.training import make_callbacks
from keras_transformer.training import make_optimizer

EPOCHS = 3
STEPS_PER_EPOCH = 6


class Killed(Exception):
    pass


class KillAt(keras.callbacks.Callback):
    """Raises in the middle of an epoch, like a process killed during training."""

    def __init__(self, epoch, batch):
        super().__init__()
        self.epoch, self.batch, self.current = epoch, batch, 0

    def on_epoch_begin(self, epoch, logs=None):
        self.current = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.current == self.epoch and batch == self.batch:
            raise Killed(f"killed at epoch {self.epoch}, batch {batch}")


def make_data():
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, 20, size=(STEPS_PER_EPOCH * 8, 6)).astype("int32")
    tokens[:, 4:] = 0  # padding
    labels = np.where(tokens > 0, (tokens * 7) % 11 + 1, 0).astype("int32")
    return tokens, labels


def make_model():
    keras.utils.set_random_seed(1)
    inputs = keras.Input(shape=(6,), dtype="int32")
    hidden = keras.layers.Embedding(20, 8, mask_zero=True)(inputs)
    logits = keras.layers.Dense(12)(hidden)
    model = keras.Model(inputs, logits)
    model.compile(
        optimizer=make_optimizer(d_model=8, warmup_steps=4),
        loss=MaskedSparseCategoricalCrossentropy(),
        metrics=[MaskedAccuracy()],
    )
    return model


def fit(model, output_dir, extra_callbacks=()):
    tokens, labels = make_data()
    callbacks = make_callbacks(output_dir, tensorboard=False) + list(extra_callbacks)
    return model.fit(
        tokens, labels, batch_size=8, epochs=EPOCHS, shuffle=False, validation_data=(tokens, labels),
        callbacks=callbacks, verbose=0,
    )


def test_killed_run_resumes_and_ends_at_the_same_step(tmp_path):
    reference = make_model()
    fit(reference, tmp_path / "reference")
    assert int(reference.optimizer.iterations) == EPOCHS * STEPS_PER_EPOCH

    run_dir = tmp_path / "run"
    with pytest.raises(Killed):
        fit(make_model(), run_dir, [KillAt(epoch=1, batch=2)])
    assert os.path.exists(run_dir / "backup" / "training_metadata.json")

    resumed = make_model()  # a new process: fresh model, same configuration
    history = fit(resumed, run_dir)
    assert len(history.history["loss"]) == EPOCHS - 1  # epoch 0 was not run again
    assert int(resumed.optimizer.iterations) == int(reference.optimizer.iterations)
    for expected, actual in zip(reference.get_weights(), resumed.get_weights()):
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)
    assert not os.path.exists(run_dir / "backup")  # removed once training ended normally

    records = json.loads((run_dir / "history.json").read_text())["epochs"]
    assert [r["epoch"] for r in records] == [1, 2, 3]
    assert load_history(run_dir / "history.json")["loss"][-1] == pytest.approx(history.history["loss"][-1])
    assert (run_dir / "history.csv").read_text().splitlines()[0].startswith("epoch,")
    for name in ("best.keras", "last.keras"):
        restored = keras.saving.load_model(run_dir / name)
        assert isinstance(restored.loss, MaskedSparseCategoricalCrossentropy)


def test_make_callbacks_contents(tmp_path):
    callbacks = make_callbacks(tmp_path, patience=2)
    kinds = [type(c).__name__ for c in callbacks]
    assert kinds[0] == "BackupAndRestore"
    assert {"BestModelCheckpoint", "LastModelCheckpoint", "HistoryLogger", "TensorBoard", "EarlyStopping"} <= set(kinds)
    minimal = make_callbacks(tmp_path, tensorboard=False, backup=False)
    assert "BackupAndRestore" not in {type(c).__name__ for c in minimal}
    assert "EarlyStopping" not in {type(c).__name__ for c in minimal}


def test_best_checkpoint_falls_back_to_training_loss(tmp_path):
    model = make_model()
    tokens, labels = make_data()
    model.fit(tokens, labels, batch_size=8, epochs=1, verbose=0,
              callbacks=make_callbacks(tmp_path, tensorboard=False, backup=False))
    assert (tmp_path / "best.keras").exists()
    assert "learning_rate" in load_history(tmp_path / "history.json")


def test_a_new_run_in_the_same_directory_starts_a_fresh_history(tmp_path):
    tokens, labels = make_data()
    for epochs in (3, 1):
        model = make_model()
        model.fit(tokens, labels, batch_size=8, epochs=epochs, verbose=0,
                  callbacks=make_callbacks(tmp_path, tensorboard=False))
    assert len(load_history(tmp_path / "history.json")["loss"]) == 1


class FakeClock:
    """Stands in for the callbacks module's clock; each training batch advances it."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class Tick(keras.callbacks.Callback):
    def __init__(self, clock, seconds_per_batch):
        super().__init__()
        self.clock, self.seconds = clock, seconds_per_batch

    def on_train_batch_begin(self, batch, logs=None):
        self.clock.now += self.seconds


@pytest.fixture
def clock(monkeypatch):
    import keras_transformer.training.callbacks as callbacks_module

    fake = FakeClock()
    monkeypatch.setattr(callbacks_module, "_clock", fake)
    return fake


def test_time_budget_stops_at_the_epoch_end_that_would_overrun(tmp_path, clock):
    tokens, labels = make_data()
    model = make_model()
    # 6 batches of 10 s: 60 s per epoch. A 150 s budget fits 2 epochs; a third would end at 180 s.
    callbacks = make_callbacks(tmp_path, tensorboard=False, max_minutes=150 / 60)
    budget = [c for c in callbacks if type(c).__name__ == "TimeBudget"][0]
    history = model.fit(tokens, labels, batch_size=8, epochs=10, verbose=0,
                        callbacks=[Tick(clock, 10.0)] + callbacks)
    assert len(history.history["loss"]) == 2
    assert int(model.optimizer.iterations) == 2 * STEPS_PER_EPOCH
    assert "would overrun" in budget.stopped_reason
    records = json.loads((tmp_path / "history.json").read_text())["epochs"]
    assert [r["epoch_seconds"] for r in records] == pytest.approx([60.0, 60.0])
    assert (tmp_path / "last.keras").exists()
    assert not (tmp_path / "backup").exists()  # a budget stop is a normal end of training


def test_time_budget_stops_mid_epoch_when_spent(tmp_path, clock):
    from keras_transformer.training import TimeBudget

    tokens, labels = make_data()
    model = make_model()
    budget = TimeBudget(35.0, verbose=0)  # 10 s per batch: stops after the 4th batch of the first epoch
    model.fit(tokens, labels, batch_size=8, epochs=3, verbose=0, callbacks=[Tick(clock, 10.0), budget])
    assert int(model.optimizer.iterations) == 4
    assert "middle of an epoch" in budget.stopped_reason


def test_time_budget_counts_the_epochs_before_an_interruption(tmp_path, clock):
    tokens, labels = make_data()
    run_dir = tmp_path / "run"
    with pytest.raises(Killed):
        make_model().fit(tokens, labels, batch_size=8, epochs=10, verbose=0,
                         callbacks=[Tick(clock, 10.0)] + make_callbacks(run_dir, tensorboard=False, max_minutes=4)
                         + [KillAt(epoch=2, batch=1)])
    # Two 60 s epochs were recorded before the kill (the 10 s of the killed epoch are lost with it); the resumed
    # run has 240 - 120 = 120 s left: 2 more epochs, then the projection stops it (a third would end at 300 s).
    resumed = make_model()
    history = resumed.fit(tokens, labels, batch_size=8, epochs=10, verbose=0,
                          callbacks=[Tick(clock, 10.0)] + make_callbacks(run_dir, tensorboard=False, max_minutes=4))
    assert len(history.history["loss"]) == 2
    assert int(resumed.optimizer.iterations) == 4 * STEPS_PER_EPOCH


def test_time_budget_rejects_a_non_positive_budget():
    from keras_transformer.training import TimeBudget

    with pytest.raises(ValueError, match="positive"):
        TimeBudget(0)


def cosine_model(total_steps):
    from keras_transformer.training import make_schedule

    model = make_model()
    schedule = make_schedule(8, warmup_steps=4, decay="cosine", total_steps=total_steps)
    model.compile(optimizer=make_optimizer(schedule=schedule), loss=MaskedSparseCategoricalCrossentropy())
    return model, schedule


def test_fit_cosine_to_budget_ends_the_decay_with_the_last_epoch_that_fits(tmp_path, clock):
    from keras_transformer.training import FitCosineToBudget

    tokens, labels = make_data()
    model, schedule = cosine_model(total_steps=10 * STEPS_PER_EPOCH)  # sized for 10 epochs
    callbacks = make_callbacks(tmp_path, tensorboard=False, max_minutes=200 / 60)
    budget = [c for c in callbacks if type(c).__name__ == "TimeBudget"][0]
    fitter = FitCosineToBudget(schedule, STEPS_PER_EPOCH, budget, max_epochs=10, verbose=0)
    # Epoch 1: 6 batches x 15 s (it also compiles); later epochs 6 x 10 s. 200 s fit 90 + 60 = 2 epochs and
    # leave 50 s, less than an epoch: the horizon must move to the end of epoch 2, where the learning rate is 0.
    tick = Tick(clock, 15.0)
    slower_first = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: setattr(tick, "seconds", 10.0))
    history = model.fit(tokens, labels, batch_size=8, epochs=10, verbose=0,
                        callbacks=[tick] + callbacks + [fitter, slower_first])
    assert len(history.history["loss"]) == 2
    assert fitter.horizon == 2 and schedule.total_steps == 2 * STEPS_PER_EPOCH
    assert float(model.optimizer.learning_rate) == 0.0  # without the fitter: still at 80% of the peak


def test_fit_cosine_to_budget_never_goes_past_the_configured_epochs(tmp_path, clock):
    from keras_transformer.training import FitCosineToBudget
    from keras_transformer.training import TimeBudget

    tokens, labels = make_data()
    model, schedule = cosine_model(total_steps=3 * STEPS_PER_EPOCH)
    budget = TimeBudget(10_000.0, verbose=0)
    fitter = FitCosineToBudget(schedule, STEPS_PER_EPOCH, budget, max_epochs=3, verbose=0)
    model.fit(tokens, labels, batch_size=8, epochs=3, verbose=0, callbacks=[Tick(clock, 10.0), budget, fitter])
    assert fitter.horizon == 3 and schedule.total_steps == 3 * STEPS_PER_EPOCH


def test_fit_cosine_to_budget_resumes_with_the_fitted_horizon(tmp_path, clock):
    """A resumed run fits the horizon from the recorded epoch times before its first step."""
    from keras_transformer.training import FitCosineToBudget

    tokens, labels = make_data()
    run_dir = tmp_path / "run"

    def callbacks_for(schedule):  # 300 s: 5 epochs of 60 s
        callbacks = make_callbacks(run_dir, tensorboard=False, max_minutes=5, cosine_schedule=schedule,
                                   steps_per_epoch=STEPS_PER_EPOCH, max_epochs=20)
        assert isinstance(callbacks[-1], FitCosineToBudget)
        return callbacks

    model, schedule = cosine_model(total_steps=20 * STEPS_PER_EPOCH)
    with pytest.raises(Killed):
        model.fit(tokens, labels, batch_size=8, epochs=20, verbose=0,
                  callbacks=[Tick(clock, 10.0)] + callbacks_for(schedule) + [KillAt(epoch=2, batch=1)])
    logged = json.loads((run_dir / "history.json").read_text())["epochs"][-1]["learning_rate"]
    resumed, schedule = cosine_model(total_steps=20 * STEPS_PER_EPOCH)
    fitted = []
    probe = keras.callbacks.LambdaCallback(on_train_begin=lambda logs: fitted.append(
        (schedule.total_steps, float(resumed.optimizer.learning_rate))))
    history = resumed.fit(tokens, labels, batch_size=8, epochs=20, verbose=0,
                          callbacks=[Tick(clock, 10.0)] + callbacks_for(schedule) + [probe])
    # Already moved when training restarts, and the rate goes on from the one logged before the interruption
    # (the interrupted run had already moved its horizon to epoch 5: the fresh 20-epoch curve is higher there).
    assert fitted[0][0] == 5 * STEPS_PER_EPOCH
    assert fitted[0][1] == pytest.approx(logged, rel=1e-5)
    assert logged < 0.9 * float(cosine_model(total_steps=20 * STEPS_PER_EPOCH)[1](2 * STEPS_PER_EPOCH))
    assert len(history.history["loss"]) == 3
    assert int(resumed.optimizer.iterations) == 5 * STEPS_PER_EPOCH
    assert float(resumed.optimizer.learning_rate) == 0.0


def fit_cosine_over_epochs(clock, epoch_seconds, **fitter_kwargs):
    """Drives a `TimeBudget` of 100 s and a `FitCosineToBudget` (20 epochs at most) through epochs of the given
    lengths without training; returns the schedule, the horizon after each epoch and whether training stopped."""
    from keras_transformer.training import FitCosineToBudget
    from keras_transformer.training import TimeBudget

    model, schedule = cosine_model(total_steps=20 * STEPS_PER_EPOCH)
    budget = TimeBudget(100.0, verbose=0)
    fitter = FitCosineToBudget(schedule, STEPS_PER_EPOCH, budget, max_epochs=20, verbose=0, **fitter_kwargs)
    budget.set_model(model)
    fitter.set_model(model)
    budget.on_train_begin()
    fitter.on_train_begin()
    horizons, stopped = [], []
    for epoch, seconds in enumerate(epoch_seconds):
        budget.on_epoch_begin(epoch)  # the budget times the epochs; the fitter reads its times
        clock.now += seconds
        budget.on_epoch_end(epoch)
        fitter.on_epoch_end(epoch)
        horizons.append(fitter.horizon)
        stopped.append(bool(model.stop_training))
    return schedule, horizons, stopped


@pytest.mark.parametrize("growth_margin, final_horizon", [(0.1, 9), (0.0, 10)])
def test_fit_cosine_to_budget_moves_the_horizon_out_only_with_a_margin(clock, growth_margin, final_horizon):
    schedule, horizons, _ = fit_cosine_over_epochs(clock, [10, 10, 10, 14, 5], growth_margin=growth_margin)
    # 3 x 10 s: 7 more fit in the 70 s left (horizon 10); a 14 s epoch: 56 s left fit 5 (9). Then a 5 s epoch
    # leaves 51 s: 5 more at the median 10 s (back to 10), but not at 11 s with the 10% margin.
    assert horizons == [10, 10, 10, 9, final_horizon]
    assert schedule.total_steps == final_horizon * STEPS_PER_EPOCH


def test_fit_cosine_to_budget_stops_once_the_decay_has_ended(clock):
    """An epoch end that reaches the horizon stops training, even if the budget now fits another epoch: the
    learning rate is 0 there and an epoch more would run at 0 (seen on Multi30k: a 17th epoch left the
    validation loss unchanged to the last digit)."""
    schedule, horizons, stopped = fit_cosine_over_epochs(clock, [10, 40, 10])
    # 10 s: 9 more fit (10); a 40 s epoch leaves 50 s: 1 more (3). The third epoch (10 s) makes the median 25 s
    # and leaves 40 s, room for a 4th even with the margin, but the decay already ended with epoch 3.
    assert horizons == [10, 3, 3]
    assert stopped == [False, False, True]
    assert schedule.total_steps == 3 * STEPS_PER_EPOCH
    assert float(schedule(3 * STEPS_PER_EPOCH)) == 0.0
