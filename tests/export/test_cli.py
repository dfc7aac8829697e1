import io
import os
import sys

from keras_transformer import cli
from keras_transformer.export.exporter import default_saved_model_path
from keras_transformer.translators import SavedModelTranslator
from tests.export.helpers import BAD_INPUTS
from tests.export.helpers import SENTENCES


def _stdin(monkeypatch, lines):
    data = b"\n".join(line.encode("utf-8") if isinstance(line, str) else line for line in lines) + b"\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_export_writes_both_formats(exported):
    assert os.path.exists(os.path.join(exported["saved_model"], "saved_model.pb"))
    assert os.path.getsize(exported["tflite"]) > 0


def test_translate_reads_an_exported_saved_model(exported, saved_translator, monkeypatch, capsys):
    lines = SENTENCES + ["", "   "] + [BAD_INPUTS[4]]
    _stdin(monkeypatch, lines)
    assert cli.main(["translate", exported["saved_model"]]) == 0
    printed = capsys.readouterr().out.split("\n")[: len(lines)]
    assert printed == saved_translator.translate(lines)
    _stdin(monkeypatch, SENTENCES)
    assert cli.main(["translate", exported["saved_model"], "--beam-size", "4", "--batch-size", "2"]) == 0
    assert capsys.readouterr().out.split("\n")[: len(SENTENCES)] == saved_translator.translate(SENTENCES, beam_size=4)


def test_translate_explains_what_a_saved_model_cannot_do(exported, saved_translator, monkeypatch, capsys):
    from keras_transformer.cli import translate as translate_command

    # the SavedModel is loaded once per session: `(translator, decoding)`, as for any exported model
    monkeypatch.setattr(translate_command, "_load_translator", lambda path: (saved_translator, None))
    _stdin(monkeypatch, SENTENCES[:1])
    assert cli.main(["translate", exported["saved_model"], "--beam-size", "3"]) == 2
    assert "--beam-size 3" in capsys.readouterr().err
    _stdin(monkeypatch, SENTENCES[:1])
    assert cli.main(["translate", exported["saved_model"], "--plot-attention", "x.png"]) == 2
    assert "needs a run directory" in capsys.readouterr().err


def test_evaluate_reads_an_exported_saved_model(exported, saved_translator, tmp_path, capsys):
    src, ref, out = tmp_path / "src.txt", tmp_path / "ref.txt", tmp_path / "out.txt"
    src.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    ref.write_text("\n".join(["1999-05-01"] * len(SENTENCES)) + "\n", encoding="utf-8")
    assert cli.main(["evaluate", exported["saved_model"], "--src", str(src), "--ref", str(ref),
                     "--output", str(out)]) == 0
    assert "BLEU" in capsys.readouterr().out
    assert out.read_text(encoding="utf-8").splitlines() == saved_translator.translate(SENTENCES)


def test_default_destination_is_under_saved_models(tmp_path, monkeypatch, capsys):
    assert default_saved_model_path("runs/de-en/") == os.path.join("saved_models", "de-en")
    monkeypatch.chdir(tmp_path)  # `quickstart` writes its run to saved_models/quickstart
    assert default_saved_model_path("saved_models/quickstart") == os.path.join("saved_models", "quickstart_saved_model")
    assert cli.main(["export", "runs/x", "--saved-model", "runs/x/"]) == 2
    assert "would overwrite the run directory" in capsys.readouterr().err


def test_export_refuses_an_existing_destination_unless_overwrite(run_dir, exported, tmp_path, capsys):
    import shutil

    pb = os.path.join(exported["saved_model"], "saved_model.pb")
    before = os.path.getmtime(pb)
    assert cli.main(["export", run_dir, "--saved-model", exported["saved_model"]]) == 2
    assert "exists; pass --overwrite" in capsys.readouterr().err
    assert cli.main(["export", run_dir, "--saved-model", str(tmp_path / "new"), "--tflite", exported["tflite"]]) == 2
    assert "tiny.tflite: exists; pass --overwrite" in capsys.readouterr().err
    assert os.path.getmtime(pb) == before and not (tmp_path / "new").exists()
    again = tmp_path / "again"
    shutil.copytree(exported["saved_model"], again)
    (again / "stale.txt").write_text("from an older export")
    assert cli.main(["export", run_dir, "--saved-model", str(again), "--overwrite", "--no-jit-compile"]) == 0
    assert sorted(os.listdir(tmp_path)) == ["again"]  # no temporary left beside it
    assert not (again / "stale.txt").exists() and (again / "saved_model.pb").exists()  # replaced whole
    # --no-jit-compile: plain graph ops, the same translations as the default XLA-compiled export.
    plain = SavedModelTranslator(str(again))
    assert plain.config()["jit_compile"] is False and SavedModelTranslator(exported["saved_model"]).config()[
        "jit_compile"] is True
    assert plain.translate(SENTENCES) == SavedModelTranslator(exported["saved_model"]).translate(SENTENCES)


def test_overwrite_replaces_only_what_an_export_of_the_same_kind_wrote(run_dir, exported, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    (data / "corpus.txt").write_text("a user's data")
    notes = tmp_path / "notes.tflite"
    notes.write_text("not a TFLite file")
    for flags, fragment in ((["--saved-model", str(data)], "data: exists and is not a SavedModel"),
                            (["--saved-model", str(tmp_path / "x"), "--tflite", str(notes)],
                             "notes.tflite: exists and is not a TFLite file"),
                            (["--saved-model", exported["tflite"]], "is a file; --saved-model names a directory"),
                            (["--saved-model", str(tmp_path / "y"), "--tflite", exported["saved_model"]],
                             "is a directory; --tflite names a file")):
        assert cli.main(["export", run_dir, *flags, "--overwrite"]) == 2
        err = capsys.readouterr().err
        assert fragment in err and len(err.strip().splitlines()) == 1, err
    assert (data / "corpus.txt").read_text() == "a user's data" and notes.read_text() == "not a TFLite file"
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_a_damaged_saved_model_is_named(exported, tmp_path, monkeypatch, capsys):
    import shutil

    damaged = tmp_path / "damaged"
    shutil.copytree(exported["saved_model"], damaged)
    pb = damaged / "saved_model.pb"
    pb.write_bytes(pb.read_bytes()[: pb.stat().st_size // 2])
    _stdin(monkeypatch, ["hello"])
    assert cli.main(["translate", str(damaged)]) == 2
    assert f"{damaged}: not a SavedModel that loads" in capsys.readouterr().err


def test_translate_stdin_that_is_not_utf8_names_the_line(exported, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"fine\nbad \xff\n")))
    assert cli.main(["translate", exported["saved_model"]]) == 2
    assert "<stdin>:2: expected UTF-8 text, found the byte 0xff" in capsys.readouterr().err


def test_export_decodes_as_tune_chose_by_default(run_dir, tmp_path, capsys):
    """A run whose `decoding.json` (written by `tune`) chose beam 3 exports a SavedModel whose serving signature
    decodes with beam 3 and the tuned length penalty, with no decoding flag given."""
    import shutil

    from keras_transformer.decoding.tuning import DecodingSettings
    from keras_transformer.runs.run import write_decoding_settings
    from keras_transformer.translators.saved_model import SavedModelTranslator

    run = str(tmp_path / "run")
    shutil.copytree(run_dir, run)
    write_decoding_settings(run, DecodingSettings(beam_size=3, length_penalty=1.25))
    out = str(tmp_path / "sm")
    assert cli.main(["export", run, "--saved-model", out, "--max-length", "6", "--no-jit-compile"]) == 0
    assert "beam search (beam 3); length penalty 1.25" in capsys.readouterr().out
    assert SavedModelTranslator(out).beam_size == 3
