"""Presets from the command line, in a fresh process, of the older layout, and the exports of a `fit` task.

TensorFlow only: the command line, subprocesses and the SavedModel/TFLite exports are TensorFlow's.
"""

import functools
import json
import os
import subprocess
import sys

import keras
import keras_hub
import pytest

from keras_transformer import load_translator
from keras_transformer.export import TranslatorModule
from keras_transformer.export.saved_model import export_saved_model
from keras_transformer.export.tflite import export_tflite
from keras_transformer.runs.run import load_run
from keras_transformer.tasks import PresetError
from keras_transformer.tasks import TransformerSeq2SeqLM
from keras_transformer.translators.saved_model import SavedModelTranslator
from keras_transformer.translators.tflite import TFLiteTranslator
from tests.cli_here import cli_here
from tests.export.helpers import SENTENCES

pytestmark = pytest.mark.tensorflow_only

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def test_export_preset_loads_with_keras_hub_in_a_fresh_process(run_dir, tmp_path, capsys):
    """The command line's export and translate (in this process), and keras-hub in a process of its own."""
    preset = str(tmp_path / "preset")
    _cli = functools.partial(cli_here, capsys)
    done = _cli("export", run_dir, "--preset", preset)
    assert done.returncode == 0, done.stderr
    code = ("import json, keras_hub, keras_transformer\n"
            f"task = keras_hub.models.Seq2SeqLM.from_preset({preset!r})\n"
            f"one = task.generate({SENTENCES[0]!r})\n"
            "assert isinstance(one, str), type(one)\n"
            f"print(json.dumps([type(task).__name__, task.generate({SENTENCES!r})]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    name, outputs = json.loads(out.stdout.strip().splitlines()[-1])
    assert name == "TransformerSeq2SeqLM"
    translated = _cli("translate", preset, stdin="\n".join(SENTENCES) + "\n")
    assert translated.returncode == 0, translated.stderr
    assert translated.stdout.splitlines() == outputs
    assert _cli("export", run_dir, "--preset", preset).returncode != 0  # no overwrite without --overwrite
    assert _cli("export", run_dir, "--preset", preset, "--overwrite").returncode == 0  # a preset over a preset
    refused = _cli("export", run_dir, "--preset", run_dir, "--overwrite")
    assert refused.returncode == 2 and "is not a preset" in refused.stderr, refused.stderr  # never over a run


def _write_old_preset(run_dir, path):
    """A preset in the layout `export --preset` wrote before the keras-hub classes: `config.json` a serialized
    `TransformerModel`, `task.json` the task's own settings."""
    run = load_run(run_dir)
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
        json.dump(keras.saving.serialize_keras_object(run.model), f)
    run.model.save_weights(os.path.join(path, "model.weights.h5"))
    run.source_tokenizer.save(os.path.join(path, "assets", "tokenizer", "source"))
    run.target_tokenizer.save(os.path.join(path, "assets", "tokenizer", "target"))
    files = {
        "task.json": {"module": "keras_transformer.tasks.seq2seq_lm", "class_name": "TransformerSeq2SeqLM",
                      "config": {"sampler": {"class_name": "GreedySampler", "config": {}}, "max_length": 24,
                                 "model": run.model_config.to_dict()},
                      "registered_name": "keras_transformer>TransformerSeq2SeqLM"},
        "tokenizer.json": {"module": "keras_transformer.data.tokenizer", "class_name": "SubwordTokenizer",
                           "config": {"shared": False}, "registered_name": "keras_transformer>SubwordTokenizer"},
        "metadata.json": {"keras_version": keras.version()},
    }
    for name, value in files.items():
        with open(os.path.join(path, name), "w", encoding="utf-8") as f:
            json.dump(value, f)
    return path


def test_an_older_preset_gets_one_line_saying_how_to_re_export(run_dir, tmp_path, capsys):
    old = _write_old_preset(run_dir, str(tmp_path / "old"))
    fix = "keras-transformer export RUN --preset DIR --overwrite"
    with pytest.raises(PresetError, match="older") as error:
        TransformerSeq2SeqLM.from_preset(old)
    assert fix in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(Exception, match="older") as error:
        keras_hub.models.Seq2SeqLM.from_preset(old)
    assert fix in str(error.value)
    with pytest.raises(PresetError, match="older"):
        load_translator(old)
    done = cli_here(capsys, "translate", old, stdin="a\n")
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and fix in lines[0], done.stderr


@pytest.mark.parametrize("edit, named", [
    (lambda config: config.update(sampler={"class_name": "BeamSampler", "config": {"num_beams": 64}}),
     "num_beams 64"),
    (lambda config: config["preprocessor"]["config"].update(decoder_sequence_length=100_000),
     "decoder_sequence_length 100000"),
], ids=["num-beams", "length"])
def test_a_preset_asking_for_more_than_decoding_should_spend_is_refused_in_one_line(run_dir, tmp_path, edit, named,
                                                                                  capsys):
    preset = str(tmp_path / "preset")
    assert cli_here(capsys, "export", run_dir, "--preset", preset).returncode == 0
    with open(os.path.join(preset, "task.json"), encoding="utf-8") as f:
        task = json.load(f)
    edit(task["config"])
    with open(os.path.join(preset, "task.json"), "w", encoding="utf-8") as f:
        json.dump(task, f)
    with pytest.raises(PresetError, match=f"task.json: .*{named}"):
        TransformerSeq2SeqLM.from_preset(preset)
    with pytest.raises(Exception, match=named):
        keras_hub.models.Seq2SeqLM.from_preset(preset)
    done = cli_here(capsys, "translate", preset, stdin="a\n")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and named in lines[0], done.stderr


def test_exports_of_a_task_trained_with_fit_translate_as_the_task(trained, tmp_path):
    task, _, _ = trained
    expected = task.translate(SENTENCES)
    assert task.generate(SENTENCES) == expected
    module = TranslatorModule(task.backbone, task.preprocessor.tokenizer.inner, task.preprocessor.target.inner,
                              max_length=task.preprocessor.decoder_sequence_length)
    saved = export_saved_model(module, str(tmp_path / "saved_model"))
    assert SavedModelTranslator(saved).translate(SENTENCES) == expected
    tflite = export_tflite(module, str(tmp_path / "model.tflite"))
    assert TFLiteTranslator(tflite).translate(SENTENCES) == expected


def test_preset_names_import_their_hub_checkpoints(monkeypatch, tmp_path):
    from keras_transformer.tasks import TransformerSeq2SeqLM
    from keras_transformer.tasks import presets
    from keras_transformer.tasks import seq2seq_lm

    assert presets.named_preset("nllb_200_distilled_600m") == "hf://facebook/nllb-200-distilled-600M"
    assert presets.named_preset("m2m100_418m") == "hf://facebook/m2m100_418M"
    assert presets.named_preset("opus_mt_de_en") == "hf://Helsinki-NLP/opus-mt-de-en"
    assert presets.named_preset("opus_mt_tc-big-en_de") == "hf://Helsinki-NLP/opus-mt-tc-big-en-de"
    assert presets.named_preset("nllb_200") is None and presets.named_preset("opus_mt_de") is None
    local = tmp_path / "m2m100_418m"
    local.mkdir()
    assert presets.named_preset(str(local)) is None  # a path that exists is never a name

    imported = []

    def import_instead(source):
        imported.append(source)
        raise LookupError("stop here")

    monkeypatch.setattr(presets, "_hub_config", lambda source: None)  # no network: a transformers checkpoint
    monkeypatch.setattr(seq2seq_lm, "imported_run", import_instead)
    with pytest.raises(LookupError, match="stop here"):
        TransformerSeq2SeqLM.from_preset("nllb_200_distilled_600m")
    assert imported == ["hf://facebook/nllb-200-distilled-600M"]
