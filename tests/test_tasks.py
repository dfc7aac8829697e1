"""The keras-hub style task: generate(), and presets that load in a fresh process with the same translations."""

import json
import os
import subprocess
import sys

import pytest

from keras_transformer.tasks import PresetError
from keras_transformer.tasks import TransformerSeq2SeqLM
from tests.export.helpers import SENTENCES
from tests.export.helpers import write_tiny_run


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return TransformerSeq2SeqLM.from_run(write_tiny_run(tmp_path_factory.mktemp("task") / "run"), max_length=12)


def test_generate_takes_a_string_or_a_list(task):
    one = task.generate(SENTENCES[0])
    assert isinstance(one, str)
    assert task.generate(SENTENCES) == task.translator.translate(SENTENCES, max_length=12)
    assert task.generate(SENTENCES, sampler="beam") == task.translator.translate(SENTENCES, beam_size=4,
                                                                                  max_length=12)


def test_a_preset_has_keras_hubs_layout_and_loads_in_a_fresh_process(task, tmp_path):
    preset = task.save_to_preset(str(tmp_path / "preset"))
    names = sorted(os.listdir(preset))
    assert names == ["assets", "config.json", "metadata.json", "model.weights.h5", "preprocessor.json",
                     "task.json", "tokenizer.json"]
    config = json.loads((tmp_path / "preset" / "config.json").read_text())
    assert {"module", "class_name", "config", "registered_name"} <= set(config)
    tokenizer = json.loads((tmp_path / "preset" / "tokenizer.json").read_text())
    assert all((tmp_path / "preset" / asset).exists() for asset in tokenizer["assets"])
    expected = task.generate(SENTENCES)
    code = ("import json, sys\nfrom keras_transformer import TransformerSeq2SeqLM\n"
            f"task = TransformerSeq2SeqLM.from_preset({preset!r})\n"
            f"print(json.dumps(task.generate({SENTENCES!r})))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert json.loads(out.stdout.strip().splitlines()[-1]) == expected
    with pytest.raises(FileExistsError, match="overwrite"):
        task.save_to_preset(preset)


def test_keras_hub_would_accept_the_preset_for_upload(task, tmp_path):
    keras_hub = pytest.importorskip("keras_hub")
    preset = task.save_to_preset(str(tmp_path / "preset"))
    # upload_preset checks the preset (config.json, model.weights.h5) before it looks at the destination: an
    # unknown URI scheme is the first thing it refuses once the preset itself passed.
    with pytest.raises(ValueError, match="(?i)uri|unknown|scheme|prefix"):
        keras_hub.upload_preset("nowhere://x", preset)


def test_a_damaged_preset_is_named(task, tmp_path):
    preset = task.save_to_preset(str(tmp_path / "preset"))
    os.remove(os.path.join(preset, "model.weights.h5"))
    with pytest.raises(PresetError, match="model.weights.h5: missing"):
        TransformerSeq2SeqLM.from_preset(preset)
