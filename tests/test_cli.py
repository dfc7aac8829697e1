"""End-to-end checks of the `keras-transformer` command line on a tiny corpus."""

import io
import json
import os
import subprocess
import sys

import pytest

from keras_transformer import cli
from keras_transformer.data.synthetic import make_synthetic_splits

TINY = ["--num-layers", "1", "--d-model", "32", "--num-heads", "2", "--d-ff", "64", "--max-length", "24",
        "--epochs", "1", "--batch-size", "32", "--vocab-size", "200", "--warmup-steps", "50", "--no-jit-compile"]


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    train, heldout = make_synthetic_splits(600, 40, seed=3)
    src = _write(root / "train.src", train.sources)
    tgt = _write(root / "train.tgt", train.targets)
    val_src = _write(root / "val.src", heldout.sources)
    val_tgt = _write(root / "val.tgt", heldout.targets)
    out = str(root / "run")
    assert cli.main(["train", "--src", src, "--tgt", tgt, "--val-src", val_src, "--val-tgt", val_tgt,
                     "--output", out, *TINY]) == 0
    return root, out, heldout


def test_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    for command in ("train", "translate", "evaluate", "export", "quickstart", "plot"):
        assert command in text
    for command in ("train", "translate", "evaluate", "export", "quickstart", "plot"):
        with pytest.raises(SystemExit) as exit_info:
            cli.main([command, "--help"])
        assert exit_info.value.code == 0


def test_train_help_lists_contract_flags(capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    text = capsys.readouterr().out
    for flag in ("--src", "--tgt", "--output", "--val-src", "--val-tgt", "--config", "--epochs", "--batch-size",
                 "--vocab-size", "--num-layers", "--d-model", "--num-heads", "--d-ff", "--dropout", "--max-length"):
        assert flag in text


def test_train_writes_a_complete_run_directory(tiny_run):
    _, out, _ = tiny_run
    for name in ("model.keras", "config.json", "history.json", "history.png", "tokenizers/source/vocab.txt"):
        assert os.path.exists(os.path.join(out, name)), name
    config = json.load(open(os.path.join(out, "config.json")))
    assert config["model"]["d_model"] == 32 and config["training"]["epochs"] == 1
    assert not os.path.exists(os.path.join(out, "backup")), "the backup is removed when training ends"


def test_translate_reads_stdin_and_writes_one_line_per_input(tiny_run, monkeypatch, capsys):
    root, out, heldout = tiny_run
    lines = list(heldout.sources[:3]) + ["", "   "]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\n".join(lines).encode() + b"\n")))
    plot = str(root / "attention.png")
    assert cli.main(["translate", out, "--plot-attention", plot]) == 0
    outputs = capsys.readouterr().out.split("\n")[:-1]
    assert len(outputs) == len(lines)
    assert outputs[3] == "" and outputs[4] == ""
    assert os.path.getsize(plot) > 1000


def test_translate_beam_search(tiny_run, monkeypatch, capsys):
    _, out, heldout = tiny_run
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(heldout.sources[0].encode() + b"\n")))
    assert cli.main(["translate", out, "--beam-size", "3"]) == 0
    assert len(capsys.readouterr().out.split("\n")) == 2


def test_evaluate_prints_sacrebleu_and_chrf(tiny_run, capsys):
    root, out, heldout = tiny_run
    src = _write(root / "test.src", heldout.sources[:10])
    ref = _write(root / "test.ref", heldout.targets[:10])
    assert cli.main(["evaluate", out, "--src", src, "--ref", ref]) == 0
    text = capsys.readouterr().out
    assert "BLEU (cased, detokenized" in text and "chrF" in text


def test_config_file_supplies_settings_and_flags_win(tiny_run, tmp_path):
    root, _, _ = tiny_run
    config = tmp_path / "settings.yaml"
    config.write_text("d_model: 16\nnum_heads: 2\nepochs: 1\nnum_layers: 1\nd_ff: 32\nvocab_size: 150\n"
                      "max_length: 24\nwarmup_steps: 10\n")
    out = str(tmp_path / "run")
    assert cli.main(["train", "--src", str(root / "train.src"), "--tgt", str(root / "train.tgt"), "--output", out,
                     "--config", str(config), "--d-ff", "48"]) == 0
    saved = json.load(open(os.path.join(out, "config.json")))
    assert saved["model"]["d_model"] == 16 and saved["model"]["d_ff"] == 48


def test_cosine_decay_ends_training_at_a_zero_learning_rate(tiny_run, tmp_path, recwarn, capsys):
    root, _, _ = tiny_run
    out = str(tmp_path / "run")
    settings = TINY + ["--epochs", "2", "--warmup-steps", "5"]  # the later flags win
    assert cli.main(["train", "--src", str(root / "train.src"), "--tgt", str(root / "train.tgt"), "--output", out,
                     *settings, "--decay", "cosine", "--max-minutes", "30"]) == 0
    # With a time budget the trainer fits the end of the decay to it (here the 2 configured epochs fit).
    assert "Cosine decay now ends with epoch 2 " in capsys.readouterr().out
    rates = [record["learning_rate"] for record in json.load(open(os.path.join(out, "history.json")))["epochs"]]
    assert len(rates) == 2 and rates[0] > 1e-4  # after epoch 1: half-way through the decay
    assert rates[1] < 1e-3 * rates[0]  # the last step of the last epoch is the end of the decay
    assert json.load(open(os.path.join(out, "config.json")))["training"]["decay"] == "cosine"
    # The epoch length is known up front: Keras does not learn it by running out of data in the first epoch.
    assert not [w for w in recwarn if "ran out of data" in str(w.message)]


def test_bad_corpus_is_a_clear_error_naming_the_file(tmp_path, capsys):
    src = _write(tmp_path / "a.src", ["eins", "zwei", "drei"])
    tgt = _write(tmp_path / "a.tgt", ["one", "two"])
    assert cli.main(["train", "--src", src, "--tgt", tgt, "--output", str(tmp_path / "run"), *TINY]) == 2
    err = capsys.readouterr().err
    assert "a.tgt" in err and "line" in err


def test_unknown_config_setting_is_rejected(tmp_path, capsys):
    src = _write(tmp_path / "a.src", ["eins"])
    config = tmp_path / "c.json"
    config.write_text('{"layers": 3}')
    assert cli.main(["train", "--src", src, "--tgt", src, "--output", str(tmp_path / "r"), "--config",
                     str(config)]) == 2
    err = capsys.readouterr().err
    assert "c.json: unknown setting 'layers' (did you mean 'num_layers'?)" in err


def test_translate_on_a_missing_run_is_a_clear_error(tmp_path, capsys):
    assert cli.main(["translate", str(tmp_path / "nowhere")]) == 2
    assert "not a keras-transformer run directory" in capsys.readouterr().err


def test_console_script_is_installed():
    result = subprocess.run(["keras-transformer", "--help"], capture_output=True, text=True,
                            env={**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]})
    assert result.returncode == 0 and "quickstart" in result.stdout
