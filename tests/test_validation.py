"""Every setting is checked once, before any work, with a message naming the setting, the value and the rule."""

import dataclasses
import json

import pytest

from keras_transformer.models import TransformerConfig
from keras_transformer.models.config import MODEL_RULES
from keras_transformer.runs.config import TRAINING_RULES
from keras_transformer.runs.config import TrainingConfig
from keras_transformer.runs.config import check_settings
from keras_transformer.runs.config import load_settings_file
from keras_transformer.validation import SettingError


def test_every_config_field_has_a_rule():
    assert set(MODEL_RULES) == {f.name for f in dataclasses.fields(TransformerConfig)}
    assert set(TRAINING_RULES) == {f.name for f in dataclasses.fields(TrainingConfig)}


def test_the_defaults_pass_their_own_rules():
    TrainingConfig()
    TransformerConfig(src_vocab_size=100, tgt_vocab_size=100)


@pytest.mark.parametrize("settings, names", [
    ({"num_layers": -1}, "num_layers (--num-layers) = -1: must be an integer >= 1"),
    ({"num_layers": 2.5}, "num_layers (--num-layers) = 2.5: must be an integer"),
    ({"num_layers": True}, "num_layers (--num-layers) = True"),
    ({"vocab_size": 3}, "vocab_size (--vocab-size) = 3: must be an integer >= 64"),
    ({"dropout": 1.0}, "dropout (--dropout) = 1.0: must be a number >= 0 and < 1"),
    ({"lr_scale": float("nan")}, "lr_scale (--lr-scale) = nan: must be a number > 0"),
    ({"lr_scale": 0}, "lr_scale (--lr-scale) = 0: must be a number > 0"),
    ({"max_minutes": float("inf")}, "max_minutes (--max-minutes) = inf"),
    ({"epochs": "3"}, "epochs (--epochs) = '3': must be an integer"),
    ({"decay": "linear"}, "decay (--decay) = 'linear': must be one of 'inverse_sqrt', 'cosine'"),
    ({"activation": "nope"}, "activation (--activation) = 'nope': must be one of"),
    ({"d_model": 100, "num_heads": 3}, "d_model (--d-model) = 100: must be divisible by num_heads"),
    ({"epochs": 2, "average_last": 3}, "average_last (--average-last) = 3: cannot average more epochs"),
    ({"token_budget": 100}, "token_budget (--token-budget) = 100: must be at least max_length (--max-length) = 256"),
    ({"share_embeddings": True}, "share_embeddings (--share-embeddings) = True: needs shared_vocab"),
    ({"layers": 3}, "unknown setting 'layers' (did you mean 'num_layers'?)"),
    ({"src_vocab_size": 10}, "src_vocab_size comes from the trained tokenizers"),
    ({"position": "none"}, "position = 'none': needs use_rotary"),
])
def test_a_bad_setting_is_refused_with_its_name_value_and_rule(settings, names):
    with pytest.raises(SettingError) as error:
        check_settings(settings)
    assert names in str(error.value)


def test_good_settings_pass_unchanged_and_split():
    model, training = check_settings({"num-layers": 2, "d_model": 64, "num_heads": 4, "epochs": 3, "dropout": 0,
                                      "lr_scale": 2, "clipnorm": None, "shared_vocab": True,
                                      "share_embeddings": True})
    assert model == {"num_layers": 2, "d_model": 64, "num_heads": 4, "dropout": 0, "share_embeddings": True}
    assert training == {"epochs": 3, "lr_scale": 2, "shared_vocab": True}


def test_the_python_api_runs_the_same_rules():
    with pytest.raises(SettingError, match=r"num_layers \(--num-layers\) = 0"):
        TransformerConfig(src_vocab_size=100, tgt_vocab_size=100, num_layers=0)
    with pytest.raises(SettingError, match=r"batch_size \(--batch-size\) = 0"):
        TrainingConfig(batch_size=0)
    assert isinstance(SettingError("x"), ValueError)  # callers that catch ValueError keep working


def test_settings_files_are_checked_and_named(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("epochs: 3\nd-model: 64\nnum_heads: 4\n")
    assert load_settings_file(str(good)) == {"epochs": 3, "d-model": 64, "num_heads": 4}
    cases = {
        "bad.json": ("{epochs: 3", "bad.json: not a valid JSON file"),
        "list.json": (json.dumps([1, 2]), "list.json: expected a mapping"),
        "wrong.yaml": ("epochs: ten\n", "wrong.yaml: epochs (--epochs) = 'ten'"),
        "binary.yaml": (b"\xff\xfe\x00", "binary.yaml: cannot read the settings file"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        with pytest.raises(SettingError) as error:
            load_settings_file(str(path))
        assert message in str(error.value), name
    with pytest.raises(SettingError, match="missing.yaml: cannot read"):
        load_settings_file(str(tmp_path / "missing.yaml"))


def test_cli_refuses_bad_flags_before_importing_tensorflow():
    """The check runs before TensorFlow is imported, so a typo costs a second, not a TensorFlow start-up."""
    import subprocess
    import sys

    # argv[0] as the `keras-transformer` console script sets it (the package registers its Keras classes on import
    # in any other program)
    code = ("import sys\nsys.argv = ['keras-transformer']\nfrom keras_transformer import cli\n"
            "rc = cli.main(['train', '--src', 'a', '--tgt', 'b', '--output', 'o', '--num-layers', '-1'])\n"
            "print(rc, 'tensorflow' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["2", "False"]
    assert "num_layers (--num-layers) = -1" in out.stderr


def test_module_examples_run():
    import doctest

    import keras_transformer.atomic
    import keras_transformer.validation

    for module in (keras_transformer.validation, keras_transformer.atomic):
        results = doctest.testmod(module)
        assert results.attempted > 0 and results.failed == 0, module.__name__
