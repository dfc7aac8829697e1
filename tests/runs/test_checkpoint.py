"""Resumable checkpoints: what they write, that a restore reproduces weights and optimizer, and clear refusals."""

import json
import os

import keras
import numpy as np
import pytest

from keras_transformer.data.pipeline import DataPosition
from keras_transformer.runs import ResumableCheckpoint
from keras_transformer.runs import ResumeError
from keras_transformer.runs import load_checkpoint_state
from keras_transformer.runs import remove_checkpoint
from keras_transformer.runs import restore_checkpoint


def _model(units=4):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(units), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse", metrics=["mae"])
    return model


def _data():
    x = np.random.default_rng(0).normal(size=(40, 3)).astype("float32")
    return x, x.sum(axis=1, keepdims=True)


def test_checkpoints_every_n_batches_and_at_epoch_ends(tmp_path):
    model = _model()
    position = DataPosition()
    checkpoint = ResumableCheckpoint(str(tmp_path), position, every_steps=3)
    x, y = _data()
    model.fit(x, y, batch_size=8, epochs=2, callbacks=[checkpoint], verbose=0)  # 5 batches per epoch
    assert checkpoint.saved == [(0, 3), (1, 0), (1, 3), (2, 0)]
    state = load_checkpoint_state(str(tmp_path))
    assert (state["epoch"], state["batch"], state["step"]) == (2, 0, 10)
    # Only the latest weights stay; no temporary file is left behind.
    assert sorted(os.listdir(tmp_path / "checkpoint")) == ["checkpoint.json", "step-10.weights.h5"]
    assert int(position.epoch.numpy()) == 1 and int(position.skip.numpy()) == 0


def test_a_mid_epoch_checkpoint_keeps_the_running_metric_sums(tmp_path):
    model = _model()
    x, y = _data()
    states = []

    def read_state(batch, logs):
        path = tmp_path / "checkpoint" / "checkpoint.json"
        states.append(json.loads(path.read_text()) if path.exists() else None)

    model.fit(x, y, batch_size=8, epochs=1, verbose=0,
              callbacks=[ResumableCheckpoint(str(tmp_path), None, every_steps=2),
                         keras.callbacks.LambdaCallback(on_train_batch_end=read_state)])
    assert states[0] is None  # nothing before the first 2 batches
    state = states[3]  # after 4 batches
    assert state["batch"] == 4 and len(state["metrics"]) == len(model.metrics_variables)
    assert state["metrics"][1] == 32.0  # the loss's running count: 4 batches of 8


def test_restore_reproduces_weights_and_optimizer_state(tmp_path):
    model = _model()
    x, y = _data()
    model.fit(x, y, batch_size=8, epochs=1, callbacks=[ResumableCheckpoint(str(tmp_path), None)], verbose=0)
    fresh = _model()
    restore_checkpoint(fresh, load_checkpoint_state(str(tmp_path)))
    for ours, theirs in zip(fresh.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(ours, theirs)
    assert int(fresh.optimizer.iterations.numpy()) == 5
    # Same state, same next step.
    model.fit(x[:8], y[:8], epochs=1, verbose=0, shuffle=False)
    fresh.fit(x[:8], y[:8], epochs=1, verbose=0, shuffle=False)
    np.testing.assert_allclose(fresh.get_weights()[0], model.get_weights()[0], rtol=1e-6)


def test_a_resumed_epoch_skips_the_batches_done(tmp_path):
    position = DataPosition()
    state = {"epoch": 1, "batch": 3, "step": 8, "metrics": None}
    checkpoint = ResumableCheckpoint(str(tmp_path), position, resume_state=state)
    checkpoint.set_model(_model())
    checkpoint.on_epoch_begin(1)
    assert (int(position.epoch.numpy()), int(position.skip.numpy())) == (1, 3)
    checkpoint.on_epoch_begin(2)  # the resume applies once
    assert (int(position.epoch.numpy()), int(position.skip.numpy())) == (2, 0)


def test_no_checkpoint_is_none_and_removal_is_idempotent(tmp_path):
    assert load_checkpoint_state(str(tmp_path)) is None
    remove_checkpoint(str(tmp_path))
    remove_checkpoint(str(tmp_path))


def test_damaged_or_foreign_checkpoints_are_refused_clearly(tmp_path):
    model = _model()
    x, y = _data()
    model.fit(x, y, batch_size=8, epochs=1, callbacks=[ResumableCheckpoint(str(tmp_path), None)], verbose=0)
    state = load_checkpoint_state(str(tmp_path))
    with pytest.raises(ResumeError, match="does not fit this model"):
        restore_checkpoint(_model(units=5), state)
    os.remove(state["path"])
    with pytest.raises(ResumeError, match="names step-5.weights.h5, which is missing; remove"):
        load_checkpoint_state(str(tmp_path))
    (tmp_path / "checkpoint" / "checkpoint.json").write_text("{\"epoch\": 1")
    with pytest.raises(ResumeError, match="not a checkpoint this version can resume from"):
        load_checkpoint_state(str(tmp_path))
