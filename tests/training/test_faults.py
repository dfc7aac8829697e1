"""Faults lose nothing: a NaN loss keeps the last good checkpoint, damaged files are named, runs are reproducible."""

import json
import os

import keras
import numpy as np
import pytest

from keras_transformer.data.synthetic import make_synthetic_corpus
from keras_transformer.runs import TrainingDivergedError
from keras_transformer.runs.directory import RunDirectoryError
from keras_transformer.runs.run import RunFileError
from keras_transformer.runs.run import load_run
from keras_transformer.training.trainer import train

MODEL = dict(num_layers=1, d_model=32, num_heads=2, d_ff=64, max_length=32)
TRAINING = dict(epochs=2, vocab_size=200, batch_size=32, jit_compile=False, warmup_steps=20)


@pytest.fixture(scope="module")
def corpus():
    return make_synthetic_corpus(300, seed=3)


class PoisonWeights(keras.callbacks.Callback):
    """Sets the first weight to NaN after `at_batch` of the first epoch (as an exploding update would)."""

    def __init__(self, at_batch):
        super().__init__()
        self.at_batch = at_batch

    def on_train_batch_end(self, batch, logs=None):
        if batch == self.at_batch and not getattr(self, "done", False):
            self.done = True
            variable = self.model.trainable_variables[0]
            variable.assign(np.full(variable.shape, np.nan, dtype="float32"))


def test_a_nan_loss_stops_training_and_keeps_the_last_good_checkpoint(corpus, tmp_path):
    run = tmp_path / "run"
    with pytest.raises(TrainingDivergedError) as error:
        train(corpus, str(run), model_settings=MODEL, training_settings={**TRAINING, "checkpoint_every": 2},
              verbose=0, callbacks=[PoisonWeights(at_batch=4)])
    message = str(error.value)
    assert "the loss became nan" in message and "last good checkpoint" in message and str(run) in message
    assert not (run / "model.keras").exists()  # nothing non-finite was saved
    state = json.loads((run / "checkpoint" / "checkpoint.json").read_text())
    assert state["batch"] == 4  # written after batch 4 (every 2), before the poisoned update showed in a loss
    model = keras.saving.load_model(run / "last.keras", compile=False) if (run / "last.keras").exists() else None
    assert model is None  # no epoch ended
    # The same command without the fault resumes from that checkpoint and finishes.
    finished = train(corpus, str(run), model_settings=MODEL, training_settings={**TRAINING, "checkpoint_every": 2},
                     verbose=0)
    assert all(np.isfinite(w).all() for w in finished.model.get_weights())
    assert (run / "model.keras").exists() and not (run / "checkpoint").exists()


def test_the_same_seed_gives_the_same_losses(corpus, tmp_path):
    losses = []
    for name in ("a", "b"):
        train(corpus, str(tmp_path / name), model_settings=MODEL, training_settings=TRAINING, verbose=0)
        records = json.loads((tmp_path / name / "history.json").read_text())["epochs"]
        losses.append([r["loss"] for r in records])
    assert losses[0] == losses[1]


def test_rerun_rules_and_damaged_files_are_named(corpus, tmp_path):
    run = tmp_path / "run"
    train(corpus, str(run), model_settings=MODEL, training_settings={**TRAINING, "epochs": 1}, verbose=0)
    before = (run / "model.keras").read_bytes()
    with pytest.raises(RunDirectoryError, match="finished run .*--overwrite"):
        train(corpus, str(run), model_settings=MODEL, training_settings={**TRAINING, "epochs": 1}, verbose=0)
    assert (run / "model.keras").read_bytes() == before
    os.remove(run / "model.keras")
    (run / "checkpoint").mkdir(exist_ok=True)  # a started run: only its own settings may resume it
    with pytest.raises(RunDirectoryError, match="num_layers = 1, and this command asks for 2"):
        train(corpus, str(run), model_settings={**MODEL, "num_layers": 2}, training_settings=TRAINING, verbose=0)

    done = tmp_path / "done"
    train(corpus, str(done), model_settings=MODEL, training_settings={**TRAINING, "epochs": 1}, verbose=0)
    path = done / "model.keras"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(RunFileError, match="model.keras: cannot be loaded"):
        load_run(str(done))
    vocab = done / "tokenizers" / "source" / "vocab.txt"
    vocab.write_bytes(vocab.read_bytes()[:40])
    with pytest.raises(ValueError, match="vocab.txt"):
        from keras_transformer.runs.run import load_tokenizers

        load_tokenizers(str(done))


def test_a_control_character_corpus_trains(tmp_path):
    """The NUL byte that crashed the tokenizer learner: words holding control characters stay out of the vocab."""
    corpus = make_synthetic_corpus(200, seed=1)
    sources = list(corpus.sources)
    sources[0] = "ein\x00null " + sources[0]
    sources[1] += " \x01\x7f\ufeff"
    run = train((sources, list(corpus.targets)), str(tmp_path / "run"), model_settings=MODEL,
                training_settings={**TRAINING, "epochs": 1}, verbose=0)
    assert not any(ch in token for token in run.source_tokenizer.vocab for ch in "\x00\x01\x7f\ufeff")
    ids = run.source_tokenizer.tokenize(["ein\x00null"]).to_list()[0]
    assert ids == [run.source_tokenizer.unk_id]
