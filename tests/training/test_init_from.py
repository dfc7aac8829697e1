"""Fine-tuning from a finished run (`train(init_from=DIR)`, `keras-transformer train --init-from DIR`)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

from keras_transformer import cli
from keras_transformer.data.streaming import scan_corpus
from keras_transformer.data.synthetic import make_synthetic_corpus
from keras_transformer.runs.directory import RunDirectoryError
from keras_transformer.runs.run import RunFileError
from keras_transformer.runs.run import load_run
from keras_transformer.runs.run import load_tokenizers
from keras_transformer.training.fine_tuning import FINE_TUNE_PEAK_LEARNING_RATE
from keras_transformer.training.fine_tuning import FINE_TUNE_WARMUP_STEPS
from keras_transformer.training.fine_tuning import fine_tuning_settings
from keras_transformer.training.schedule import make_schedule
from keras_transformer.training.trainer import train

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = dict(num_layers=1, d_model=32, num_heads=2, d_ff=64, max_length=32)
TRAINING = dict(batch_size=32, jit_compile=False)
FINE_TUNE = ["--epochs", "2", "--batch-size", "32", "--checkpoint-every", "2", "--no-jit-compile"]


class StartWeights(keras.callbacks.Callback):
    """Keeps the weights and the optimizer step at the start of the first `fit()` of a run."""

    def on_train_begin(self, logs=None):
        if not hasattr(self, "weights"):
            self.weights = [np.array(w) for w in self.model.get_weights()]
            self.step = int(self.model.optimizer.iterations.numpy())


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A finished run, trained 3 epochs on the corpus that the fine-tunes train on too."""
    root = tmp_path_factory.mktemp("init_from")
    corpus = make_synthetic_corpus(600, seed=3)
    src, tgt = _write(root / "train.src", corpus.sources), _write(root / "train.tgt", corpus.targets)
    with pytest.warns(UserWarning):  # the tiny corpus supports fewer than 200 target pieces
        train(corpus, str(root / "base"), model_settings=MODEL,
              training_settings={**TRAINING, "epochs": 3, "vocab_size": 200, "warmup_steps": 30}, verbose=0)
    return root, str(root / "base"), corpus, src, tgt


def _losses(run_dir):
    with open(os.path.join(run_dir, "history.json"), encoding="utf-8") as f:
        return [record["loss"] for record in json.load(f)["epochs"]]


def test_a_fine_tune_starts_from_the_runs_weights_tokenizers_and_loss(base, tmp_path):
    _, base_dir, corpus, _, _ = base
    start = StartWeights()
    run = train(corpus, str(tmp_path / "tuned"), model_settings={"attention_dropout": 0.0},
                training_settings={**TRAINING, "epochs": 1}, verbose=0, callbacks=[start],
                init_from=os.path.relpath(base_dir))
    before = load_run(base_dir)
    assert start.step == 0
    for ours, theirs in zip(start.weights, before.model.get_weights(), strict=True):
        np.testing.assert_array_equal(ours, theirs)
    # The first epoch goes on where the run ended, far below a fresh model's first epoch on the same data.
    fresh_first, *_, base_last = _losses(base_dir)
    tuned_first = _losses(str(tmp_path / "tuned"))[0]
    assert tuned_first < base_last + 0.1 * (fresh_first - base_last), (tuned_first, base_last, fresh_first)
    # The tokenizers are the run's, the model its settings but for the dropout asked for.
    source, target = load_tokenizers(str(tmp_path / "tuned"))
    assert source.vocab == before.source_tokenizer.vocab and target.vocab == before.target_tokenizer.vocab
    assert (source is target) == (before.source_tokenizer is before.target_tokenizer)
    config = json.loads((tmp_path / "tuned" / "config.json").read_text())
    assert config["model"] == {**before.model_config.to_dict(), "attention_dropout": 0.0}
    assert config["training"]["init_from"] == base_dir == run.training_config.init_from
    assert config["training"]["warmup_steps"] == FINE_TUNE_WARMUP_STEPS
    schedule = make_schedule(32, config["training"]["warmup_steps"], config["training"]["lr_scale"])
    peak = float(schedule(FINE_TUNE_WARMUP_STEPS - 1))  # the optimizer's iteration 399 is the schedule's step 400
    assert peak == pytest.approx(FINE_TUNE_PEAK_LEARNING_RATE, rel=1e-5)


def test_the_fine_tuning_schedule_defaults_give_way_to_explicit_settings(base):
    _, base_dir, _, _, _ = base
    _, training = fine_tuning_settings(base_dir, "new", {}, {})
    assert training["warmup_steps"] == FINE_TUNE_WARMUP_STEPS
    assert training["lr_scale"] * (32 * FINE_TUNE_WARMUP_STEPS) ** -0.5 == pytest.approx(FINE_TUNE_PEAK_LEARNING_RATE)
    _, training = fine_tuning_settings(base_dir, "new", {}, {"warmup_steps": 100})
    assert training["lr_scale"] * (32 * 100) ** -0.5 == pytest.approx(FINE_TUNE_PEAK_LEARNING_RATE)
    _, training = fine_tuning_settings(base_dir, "new", {}, {"lr_scale": 0.5, "decay": "cosine"})
    assert (training["lr_scale"], training["decay"], training["warmup_steps"]) == (0.5, "cosine", 400)
    model, training = fine_tuning_settings(base_dir, "new", {"d_model": 32, "dropout": 0.3}, {"vocab_size": 200})
    assert (model["d_model"], model["num_layers"], model["dropout"]) == (32, 1, 0.3)
    assert (training["vocab_size"], training["shared_vocab"]) == (200, False)


@pytest.mark.parametrize("flags, named", [
    (["--d-model", "64"], "d_model (--d-model) = 64 contradicts the model of --init-from {base} (d_model = 32)"),
    (["--num-layers", "2"], "num_layers (--num-layers) = 2 contradicts the model of --init-from {base} "
                            "(num_layers = 1)"),
    (["--max-length", "64", "--dropout", "0.3"], "max_length (--max-length) = 64 contradicts"),
    (["--vocab-size", "300"], "vocab_size (--vocab-size) = 300 contradicts the tokenizers of --init-from {base} "
                              "(vocab_size = 200)"),
    (["--shared-vocab"], "shared_vocab (--shared-vocab) = True contradicts the tokenizers of --init-from {base} "
                         "(shared_vocab = False)"),
    (["--target-lang", "deu_Latn"], "target_language (--target-lang) = 'deu_Latn': --init-from {base} translates "
                                    "one language pair"),
], ids=["d-model", "num-layers", "max-length", "vocab-size", "shared-vocab", "target-lang"])
def test_a_flag_that_contradicts_the_run_is_refused_in_one_line(base, tmp_path, capsys, flags, named):
    _, base_dir, _, _, _ = base
    # The corpus files do not exist: the refusal comes before anything is read.
    code = cli.main(["train", "--src", "a", "--tgt", "b", "--output", str(tmp_path / "new"), "--init-from", base_dir,
                     *flags])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert named.format(base=base_dir) in err
    assert not (tmp_path / "new").exists()


def test_the_same_model_settings_and_other_dropout_rates_are_accepted(base, tmp_path):
    from keras_transformer.cli.settings import collect_settings

    _, base_dir, _, _, _ = base
    args = cli.build_parser().parse_args(["train", "--src", "a", "--tgt", "b", "--output", str(tmp_path / "new"),
                                          "--init-from", base_dir, "--d-model", "32", "--vocab-size", "200",
                                          "--dropout", "0.3", "--word-dropout", "0.1"])
    assert collect_settings(args)["dropout"] == 0.3


def _damage(kind, base_dir, copy):
    if kind == "missing":
        return str(copy / "nowhere"), "not found"
    shutil.copytree(base_dir, copy)
    if kind == "no model":
        os.remove(copy / "model.keras")
        return str(copy), "model.keras is missing"
    if kind == "unfinished":
        os.remove(copy / "model.keras")
        (copy / "checkpoint").mkdir()
        return str(copy), "model.keras is missing (the run has not finished"
    if kind == "no tokenizers":
        shutil.rmtree(copy / "tokenizers")
        return str(copy), os.path.join("tokenizers", "source", "tokenizer.json") + " is missing"
    if kind == "damaged config":
        (copy / "config.json").write_text('{"model": [')
        return str(copy), "config.json is damaged"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["missing", "no model", "unfinished", "no tokenizers", "damaged config", "output"])
def test_a_missing_or_damaged_run_is_refused_before_any_work(base, tmp_path, capsys, kind):
    _, base_dir, _, _, _ = base
    output = tmp_path / "new"
    if kind == "output":
        shutil.copytree(base_dir, output)
        init_from, named = str(output), "is the --output directory"
    else:
        init_from, named = _damage(kind, base_dir, tmp_path / "copy")
    code = cli.main(["train", "--src", "a", "--tgt", "b", "--output", str(output), "--init-from", init_from])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"--init-from {init_from}" in err and named in err, err
    assert kind == "output" or not output.exists()


def test_a_truncated_model_is_named_and_nothing_is_written(base, tmp_path):
    _, base_dir, corpus, _, _ = base
    copy = tmp_path / "copy"
    shutil.copytree(base_dir, copy)
    model = copy / "model.keras"
    model.write_bytes(model.read_bytes()[: model.stat().st_size // 2])
    with pytest.raises(RunFileError, match="model.keras: cannot be loaded"):
        train(corpus, str(tmp_path / "new"), training_settings=TRAINING, verbose=0, init_from=str(copy))
    assert not (tmp_path / "new").exists()


def test_a_killed_fine_tune_resumes_from_its_own_checkpoint(base, tmp_path):
    _, base_dir, _, src, tgt = base
    output = tmp_path / "tuned"
    command = [sys.executable, "-m", "keras_transformer.cli", "train", "--src", src, "--tgt", tgt,
               "--output", str(output), "--init-from", base_dir, *FINE_TUNE]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "PYTHONPATH": ROOT})
    checkpoint = output / "checkpoint" / "checkpoint.json"
    try:
        deadline = time.time() + 240
        while not checkpoint.exists() and process.poll() is None and time.time() < deadline:
            time.sleep(0.02)
        assert checkpoint.exists() and process.poll() is None, "the checkpoint never came while the run ran"
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        process.wait()
    assert not (output / "model.keras").exists()

    def again(**kwargs):
        data = scan_corpus([src], [tgt], sample_size=1)
        settings = {**TRAINING, "epochs": 2, "checkpoint_every": 2, **kwargs.pop("settings", {})}
        return train(data, str(output), training_settings=settings, verbose=0, **kwargs)

    with pytest.raises(RunDirectoryError, match=f"init_from = {base_dir!r}, and this command asks for None"):
        again()
    start = StartWeights()
    state = json.loads(checkpoint.read_text())
    again(init_from=base_dir, callbacks=[start])
    assert start.step == state["step"] > 0  # the fine-tune's own checkpoint, not the run it started from
    assert (output / "model.keras").exists() and not (output / "checkpoint").exists()
    assert len(_losses(str(output))) == 2
    # A finished fine-tune is a run as any: refused without --overwrite, started afresh from DIR with it.
    with pytest.raises(RunDirectoryError, match="finished run"):
        again(init_from=base_dir)
    start = StartWeights()
    again(init_from=base_dir, callbacks=[start], overwrite=True, settings={"epochs": 1, "steps_per_epoch": 2})
    assert start.step == 0
    for ours, theirs in zip(start.weights, load_run(base_dir).model.get_weights(), strict=True):
        np.testing.assert_array_equal(ours, theirs)
