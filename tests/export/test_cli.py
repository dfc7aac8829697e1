import io
import os
import sys

from keras_transformer import cli
from keras_transformer.export.cli import default_saved_model_path
from tests.export.helpers import BAD_INPUTS, SENTENCES


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
    monkeypatch.setattr(cli, "_load_translator", lambda path: saved_translator)  # loaded once per session
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
