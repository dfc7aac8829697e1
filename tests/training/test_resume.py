"""A resumed run equals an uninterrupted one, whatever its flags: fixed-length epochs (`steps_per_epoch`) with
mid-epoch checkpoints, early stopping with weight averaging, an interruption during validation.

An interruption here is an exception raised by a callback that runs after the checkpoint (the state on disk is
what a kill at that moment leaves); the next `train()` call is a new process's resume. tools/kill_resume.py does
the same with `kill -9` at random moments of the command line's runs."""

import json
import os

import keras
import numpy as np
import pytest

from keras_transformer.data.synthetic import make_synthetic_corpus
from keras_transformer.training.trainer import train

MODEL = dict(num_layers=1, d_model=32, num_heads=2, d_ff=64, max_length=32, dropout=0.1)
TRAINING = dict(vocab_size=200, batch_size=32, jit_compile=False, warmup_steps=10, seed=11)


class Interrupted(Exception):
    pass


class InterruptAt(keras.callbacks.Callback):
    """Raises once the optimizer has made `step` steps, or when validation starts after `step` steps."""

    def __init__(self, step, during_validation=False):
        super().__init__()
        self.step, self.during_validation = step, during_validation

    def _steps(self):
        return int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))

    def on_train_batch_end(self, batch, logs=None):
        if not self.during_validation and self._steps() == self.step:
            raise Interrupted(self.step)

    def on_test_begin(self, logs=None):
        if self.during_validation and self._steps() == self.step:
            raise Interrupted(self.step)


@pytest.fixture(scope="module")
def corpora():
    return make_synthetic_corpus(300, seed=3), make_synthetic_corpus(40, seed=4)


def _run(corpora, path, settings, interrupts):
    """Trains to the end through the given interruptions; returns (final weights, per-epoch records)."""
    train_corpus, val_corpus = corpora
    for interrupt in interrupts:
        with pytest.raises(Interrupted):
            train(train_corpus, str(path), val_data=val_corpus, model_settings=MODEL,
                  training_settings={**TRAINING, **settings}, verbose=0, callbacks=[interrupt])
    run = train(train_corpus, str(path), val_data=val_corpus, model_settings=MODEL,
                training_settings={**TRAINING, **settings}, verbose=0)
    return run.model.get_weights(), json.loads((path / "history.json").read_text())["epochs"]


def _assert_same_run(resumed, reference):
    (weights, records), (expected_weights, expected_records) = resumed, reference
    assert [r["epoch"] for r in records] == [r["epoch"] for r in expected_records]
    for record, expected in zip(records, expected_records):
        for key in ("loss", "val_loss"):
            assert record[key] == pytest.approx(expected[key], abs=1e-6), (key, records, expected_records)
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(weights, expected_weights)) <= 1e-6


@pytest.mark.slow
def test_an_epoch_interrupted_mid_way_resumes_exactly(corpora, tmp_path, monkeypatch):
    # Epochs are data passes (about 10 batches); dropout on: its generators' state is part of the checkpoint.
    settings = dict(epochs=2, checkpoint_every=3)
    reference = _run(corpora, tmp_path / "reference", settings, [])
    _assert_same_run(_run(corpora, tmp_path / "resumed", settings, [InterruptAt(14)]), reference)

    # Killed after model.keras is written and before the checkpoint is removed: the re-run finishes from it.
    def killed(run_dir):
        raise Interrupted("before the checkpoint is removed")

    path = tmp_path / "killed-at-the-end"
    with monkeypatch.context() as patch:
        patch.setattr("keras_transformer.training.trainer.remove_checkpoint", killed)
        with pytest.raises(Interrupted):
            _run(corpora, path, settings, [])
    assert (path / "model.keras").exists() and (path / "checkpoint").is_dir()
    _assert_same_run(_run(corpora, path, settings, []), reference)
    assert (path / "history.png").exists() and not (path / "checkpoint").exists()
    assert not [name for name in os.listdir(path) if name.startswith((".tmp-", ".old-"))]  # no temporary left


@pytest.mark.slow
def test_fixed_length_epochs_with_early_stopping_and_averaging_resume_exactly(corpora, tmp_path):
    # Epochs of 4 batches over passes of 10: the interruptions fall in the middle of an epoch, in the second pass,
    # and during a validation pass after a batch count that --checkpoint-every divides (the resumed epoch still has
    # its loss recorded); patience 1 stops the run early, which ends with the average of the 2 epochs up to the
    # best one.
    settings = dict(epochs=8, steps_per_epoch=4, checkpoint_every=2, patience=1, average_last=2)
    reference = _run(corpora, tmp_path / "reference", settings, [])
    assert len(reference[1]) < 8, reference[1]  # early stopping ended the run
    resumed = _run(corpora, tmp_path / "resumed", settings,
                   [InterruptAt(7), InterruptAt(11), InterruptAt(12, during_validation=True)])
    _assert_same_run(resumed, reference)
