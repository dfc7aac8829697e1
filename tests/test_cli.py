"""End-to-end checks of the `keras-transformer` command line on a tiny corpus."""

import io
import json
import os
import shutil
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
    # Two pairs over --max-length 24 and a line of 2 MiB: skipped, counted and recorded, never cut.
    too_long = ["one two three " * 10, "a b", "w " * (1 << 20)]
    src = _write(root / "train.src", train.sources + too_long)
    tgt = _write(root / "train.tgt", train.targets + ["x", "1 2 3 " * 10, "y"])
    val_src = _write(root / "val.src", heldout.sources)
    val_tgt = _write(root / "val.tgt", heldout.targets)
    out = str(root / "run")
    # A settings file supplies the warm-up and a d_ff that the flag overrides (test_config_file_...).
    config = _write(root / "settings.yaml", ["warmup_steps: 50", "d_ff: 48"])
    flags = TINY[:TINY.index("--warmup-steps")] + TINY[TINY.index("--warmup-steps") + 2:]
    assert cli.main(["train", "--src", src, "--tgt", tgt, "--val-src", val_src, "--val-tgt", val_tgt,
                     "--output", out, "--config", config, *flags]) == 0
    return root, out, heldout


def test_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    for command in ("train", "translate", "evaluate", "tune", "ensemble", "export", "quickstart", "plot"):
        assert command in text
    for command in ("train", "translate", "evaluate", "tune", "ensemble", "export", "quickstart", "plot"):
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


def test_each_dropout_has_its_own_flag_checked_before_training(tmp_path, capsys):
    from keras_transformer.cli.settings import collect_settings

    args = cli.build_parser().parse_args(["train", "--src", "a", "--tgt", "b", "--output", str(tmp_path / "run"),
                                          "--dropout", "0.3", "--attention-dropout", "0.1",
                                          "--activation-dropout", "0", "--word-dropout", "0.1"])
    settings = collect_settings(args)
    assert (settings["dropout"], settings["attention_dropout"], settings["activation_dropout"]) == (0.3, 0.1, 0.0)
    assert settings["word_dropout"] == 0.1
    for flag in ("--attention-dropout", "--word-dropout"):
        assert cli.main(["train", "--src", "a", "--tgt", "b", "--output", str(tmp_path / "run"), flag, "1.5"]) != 0
        err = capsys.readouterr().err
        assert f"{flag[2:].replace('-', '_')} ({flag}) = 1.5" in err
    assert not (tmp_path / "run").exists()


def test_train_writes_a_complete_run_directory(tiny_run):
    _, out, _ = tiny_run
    for name in ("model.keras", "config.json", "history.json", "history.png", "tokenizers/source/vocab.txt"):
        assert os.path.exists(os.path.join(out, name)), name
    config = json.load(open(os.path.join(out, "config.json")))
    assert config["model"]["d_model"] == 32 and config["training"]["epochs"] == 1
    data = config["data"]
    assert data["pairs_read"] == 603 and data["skipped_long_text"] == 1 and data["skipped_blank_side"] == 0
    assert data["skipped_over_max_length"] == 2 and data["validation"]["pairs_read"] == 40
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
    assert "signatures: BLEU nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in text


def test_evaluate_report_holds_the_scores_of_the_written_translations(tiny_run, capsys):
    import sacrebleu

    root, out, heldout = tiny_run
    src = _write(root / "report.src", heldout.sources[:10])
    ref = _write(root / "report.ref", heldout.targets[:10])
    hyp, report = str(root / "report.hyp"), str(root / "report.json")
    assert cli.main(["evaluate", out, "--src", src, "--ref", ref, "--beam-size", "2", "--length-penalty", "1",
                     "--output", hyp, "--report", report]) == 0
    scores = json.load(open(report))
    hypotheses = open(hyp, encoding="utf-8").read().split("\n")[:-1]
    refs = [list(heldout.targets[:10])]
    assert scores["sentences"] == len(hypotheses) == 10
    assert (scores["beam_size"], scores["length_penalty"]) == (2, 1.0)
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hypotheses, refs).score, abs=1e-3)
    assert scores["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hypotheses, refs).score, abs=1e-3)
    assert scores["signatures"]["bleu"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert scores["signatures"]["bleu_lowercased"].startswith("nrefs:1|case:lc|")
    assert scores["signatures"]["chrf"].startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|")
    assert f"{scores['bleu']:.2f}" in capsys.readouterr().out


def test_tune_chooses_on_held_out_data_and_evaluate_decodes_with_the_choice(tiny_run, tmp_path, capsys):
    root, _, heldout = tiny_run
    run = str(tmp_path / "run")
    shutil.copytree(tiny_run[1], run)  # the module's run stays without decoding.json for the other tests
    src = _write(root / "tune.src", heldout.sources[:12])
    ref = _write(root / "tune.ref", heldout.targets[:12])
    assert cli.main(["tune", run, "--src", src, "--ref", ref, "--beam-sizes", "2",
                     "--length-penalties", "0", "1.5"]) == 0
    text = capsys.readouterr().out
    assert "beam 2, length penalty 0:" in text and "beam 2, length penalty 1.5:" in text and "<- chosen" in text
    chosen = json.load(open(os.path.join(run, "decoding.json")))
    assert chosen["beam_size"] == 2 and chosen["length_penalty"] in (0.0, 1.5) and len(chosen["grid"]) == 2
    assert chosen["sentences"] == 12 and chosen["tuned_on"] == "tune.src / tune.ref"
    # evaluate (no decoding flags) decodes with the choice: the same BLEU as the tune row it chose.
    assert cli.main(["evaluate", run, "--src", src, "--ref", ref]) == 0
    text = capsys.readouterr().out
    assert f"beam 2, length penalty {chosen['length_penalty']:g} (decoding.json" in text
    bleu = float(text.split("BLEU (cased, detokenized, sacreBLEU 13a) = ")[1].split()[0])
    assert bleu == pytest.approx(chosen["bleu"], abs=0.006)
    # Flags still win; a second tune without --overwrite is refused before any decoding.
    assert cli.main(["evaluate", run, "--src", src, "--ref", ref, "--beam-size", "1"]) == 0
    assert "decoding: greedy" in capsys.readouterr().out
    assert cli.main(["tune", run, "--src", src, "--ref", ref]) == 2
    assert "decoding.json: exists; pass --overwrite" in capsys.readouterr().err


def _bleu(text):
    return float(text.split("BLEU (cased, detokenized, sacreBLEU 13a) = ")[1].split()[0])


def test_an_ensemble_directory_decodes_its_runs_as_one(tiny_run, tmp_path, capsys):
    root, run, heldout = tiny_run
    copy = str(tmp_path / "copy")
    shutil.copytree(run, copy)
    ens = str(tmp_path / "ens")
    assert cli.main(["ensemble", run, copy, "--output", ens]) == 0
    spec = json.load(open(os.path.join(ens, "ensemble.json")))
    assert [os.path.normpath(os.path.join(ens, m)) for m in spec["members"]] == [os.path.realpath(run),
                                                                                  os.path.realpath(copy)]
    src = _write(tmp_path / "e.src", heldout.sources[:10])
    ref = _write(tmp_path / "e.ref", heldout.targets[:10])
    # A run ensembled with its own copy averages two equal distributions: the same translations as the run.
    scores = []
    for model in (run, ens):
        assert cli.main(["evaluate", model, "--src", src, "--ref", ref, "--beam-size", "2",
                         "--output", str(tmp_path / (os.path.basename(model) + ".out"))]) == 0
        scores.append(_bleu(capsys.readouterr().out))
    assert (tmp_path / "run.out").read_text() == (tmp_path / "ens.out").read_text()
    assert scores[0] == scores[1]
    # tune writes the ensemble's own decoding.json; the members keep theirs (none here).
    assert cli.main(["tune", ens, "--src", src, "--ref", ref, "--beam-sizes", "2", "--length-penalties", "1"]) == 0
    capsys.readouterr()
    assert json.load(open(os.path.join(ens, "decoding.json")))["beam_size"] == 2
    assert not os.path.exists(os.path.join(run, "decoding.json"))
    # What cannot be done says so in one line.
    assert cli.main(["export", ens, "--ctranslate2", str(tmp_path / "ct2")]) == 2
    assert "is an ensemble directory: a CTranslate2 model holds one run" in capsys.readouterr().err
    assert not (tmp_path / "ct2").exists()
    assert cli.main(["ensemble", run, copy, "--output", ens]) == 2
    assert "ensemble.json: exists; pass --overwrite" in capsys.readouterr().err
    assert cli.main(["ensemble", run, run, "--output", str(tmp_path / "twice")]) == 2
    assert "named twice" in capsys.readouterr().err
    # --combine prob (fairseq's mean of probabilities) is kept in ensemble.json and decodes: a run and its copy
    # average two equal distributions under either rule.
    prob = str(tmp_path / "prob")
    assert cli.main(["ensemble", run, copy, "--output", prob, "--combine", "prob"]) == 0
    assert json.load(open(os.path.join(prob, "ensemble.json")))["combine"] == "prob"
    assert "probabilities averaged" in capsys.readouterr().out
    assert cli.main(["evaluate", prob, "--src", src, "--ref", ref, "--beam-size", "2",
                     "--output", str(tmp_path / "prob.out")]) == 0
    assert _bleu(capsys.readouterr().out) == scores[0]
    assert (tmp_path / "prob.out").read_text() == (tmp_path / "run.out").read_text()
    with pytest.raises(SystemExit):
        cli.main(["ensemble", run, copy, "--output", str(tmp_path / "bad"), "--combine", "max"])
    assert "invalid choice: 'max'" in capsys.readouterr().err
    with open(os.path.join(prob, "ensemble.json"), "w", encoding="utf-8") as f:
        json.dump({**spec, "combine": "max"}, f)
    assert cli.main(["evaluate", prob, "--src", src, "--ref", ref]) == 2
    assert "ensemble.json: damaged or not written by keras-transformer ensemble (combine 'max'" in \
        capsys.readouterr().err
    assert cli.main(["ensemble", run, "--output", str(tmp_path / "one")]) == 2
    assert "at least 2 run directories" in capsys.readouterr().err
    vocab = os.path.join(copy, "tokenizers", "source", "vocab.txt")
    lines = open(vocab, encoding="utf-8").read().split("\n")
    lines[-3], lines[-2] = lines[-2], lines[-3]  # the same tokens, two ids swapped
    open(vocab, "w", encoding="utf-8").write("\n".join(lines))
    assert cli.main(["ensemble", run, copy, "--output", str(tmp_path / "mixed")]) == 2
    assert "source tokenizer differs" in capsys.readouterr().err
    shutil.rmtree(copy)
    assert cli.main(["evaluate", ens, "--src", src, "--ref", ref]) == 2
    err = capsys.readouterr().err
    assert "its member run directory" in err and "is missing" in err


def test_length_penalty_is_checked_and_damaged_decoding_json_is_named(tiny_run, tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.main(["evaluate", "x", "--src", "a", "--ref", "b", "--length-penalty", "-1"])
    assert "expected a number in [0, 10], got -1" in capsys.readouterr().err
    run = str(tmp_path / "run")
    shutil.copytree(tiny_run[1], run)
    with open(os.path.join(run, "decoding.json"), "w") as f:
        f.write("{not json")
    src = _write(tmp_path / "a.src", ["ein Hund"])
    assert cli.main(["evaluate", run, "--src", src, "--ref", src]) == 2
    assert "decoding.json: damaged or not written by keras-transformer tune" in capsys.readouterr().err


def test_config_file_supplies_settings_and_flags_win(tiny_run):
    """The module's run was trained with `--config settings.yaml` (warmup_steps 50, d_ff 48) and `--d-ff 64`."""
    _, out, _ = tiny_run
    saved = json.load(open(os.path.join(out, "config.json")))
    assert saved["training"]["warmup_steps"] == 50 and saved["model"]["d_ff"] == 64
    assert saved["model"]["d_model"] == 32


def test_no_max_minutes_drops_the_config_files_time_budget(tmp_path, capsys):
    from keras_transformer.cli.settings import collect_settings

    config = tmp_path / "recipe.yaml"
    config.write_text("epochs: 40\nmax_minutes: 88\n")
    common = ["train", "--src", "a", "--tgt", "b", "--output", str(tmp_path / "run"), "--config", str(config)]
    assert collect_settings(cli.build_parser().parse_args(common))["max_minutes"] == 88
    settings = collect_settings(cli.build_parser().parse_args(common + ["--no-max-minutes", "--epochs", "19"]))
    assert "max_minutes" not in settings and settings["epochs"] == 19
    assert cli.main(common + ["--no-max-minutes", "--max-minutes", "30"]) == 2
    assert "--max-minutes 30 and --no-max-minutes contradict each other" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_cosine_decay_ends_training_at_a_zero_learning_rate(tiny_run, tmp_path, recwarn, capsys):
    root, _, _ = tiny_run
    out = str(tmp_path / "run")
    settings = TINY + ["--epochs", "2", "--warmup-steps", "5"]  # the later flags win
    assert cli.main(["train", "--src", str(root / "train.src"), "--tgt", str(root / "train.tgt"), "--output", out,
                     "--val-src", str(root / "val.src"), "--val-tgt", str(root / "val.tgt"),
                     *settings, "--decay", "cosine", "--max-minutes", "30"]) == 0
    # With a time budget the trainer fits the end of the decay to it (here the 2 configured epochs fit).
    assert "Cosine decay now ends with epoch 2 " in capsys.readouterr().out
    rates = [record["learning_rate"] for record in json.load(open(os.path.join(out, "history.json")))["epochs"]]
    assert len(rates) == 2 and rates[0] > 1e-4  # after epoch 1: half-way through the decay
    assert rates[1] < 1e-3 * rates[0]  # the last step of the last epoch is the end of the decay
    assert json.load(open(os.path.join(out, "config.json")))["training"]["decay"] == "cosine"
    # The lengths of an epoch and of a validation pass are known up front: Keras does not learn them by running out
    # of data in the first epoch.
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
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
    result = subprocess.run(["keras-transformer", "--help"], capture_output=True, text=True,
                            env={**os.environ, "PATH": path})
    assert result.returncode == 0 and "quickstart" in result.stdout
