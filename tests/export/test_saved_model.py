import json
import os
import subprocess
import sys
import sysconfig

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import beam_search
from keras_transformer.decoding.translator import Translator
from keras_transformer.decoding.translator import encode_sources
from keras_transformer.translators import SavedModelTranslator
from tests.export.helpers import BAD_INPUTS
from tests.export.helpers import SENTENCES

# Runs in a fresh interpreter with `-I -S`: no PYTHONPATH, no current directory and no `.pth` files, so the editable
# install of keras_transformer is invisible; only site-packages (tensorflow, tensorflow_text) is put on the path.
CLIENT = """
import importlib.util, json, sys
sys.path.append(sys.argv[1])
assert importlib.util.find_spec("keras_transformer") is None, "keras_transformer is importable"
import tensorflow as tf
import tensorflow_text  # noqa: F401 (registers the tokenizer ops)
translate = tf.saved_model.load(sys.argv[2]).signatures["serving_default"]
outputs = translate(text=tf.constant(json.loads(sys.argv[3])))
assert list(outputs) == ["translation"], list(outputs)
assert "keras_transformer" not in sys.modules
print(json.dumps([t.decode("utf-8") for t in outputs["translation"].numpy()]))
"""


def _subprocess_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    return env


def test_loads_and_runs_where_keras_transformer_is_not_importable(exported, saved_translator, tmp_path):
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", CLIENT, sysconfig.get_paths()["purelib"], os.path.abspath(
            exported["saved_model"]), json.dumps(SENTENCES)],
        cwd=tmp_path, env=_subprocess_env(), capture_output=True, text=True, timeout=240,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    translations = json.loads(result.stdout.strip().splitlines()[-1])
    assert translations == saved_translator.translate(SENTENCES, beam_size=None)


def test_saved_model_cli_lists_the_signatures(exported, tmp_path):
    command = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    if not os.path.exists(command):
        pytest.skip("saved_model_cli is not installed next to this Python")
    result = subprocess.run(
        [command, "show", "--all", "--dir", exported["saved_model"]],
        cwd=tmp_path, env=_subprocess_env(), capture_output=True, text=True, timeout=240,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("serving_default", "translate_with_ids", "translate_greedy", "translate_beam"):
        assert f"signature_def['{name}']" in result.stdout
    serving = result.stdout.split("signature_def['serving_default']")[1].split("signature_def[")[0]
    assert "inputs['text']" in serving and "outputs['translation']" in serving
    assert serving.count("dtype: DT_STRING") == 2 and serving.count("shape: (-1)") == 2


def test_signatures_take_and_return_strings(saved_translator):
    signature = saved_translator.signatures["serving_default"]
    _, inputs = signature.structured_input_signature
    assert {name: (spec.dtype, spec.shape.as_list()) for name, spec in inputs.items()} == {
        "text": (tf.string, [None])
    }
    outputs = signature.structured_outputs
    assert list(outputs) == ["translation"] and outputs["translation"].dtype == tf.string
    ids = saved_translator.signatures["translate_with_ids"].structured_outputs
    assert sorted(ids) == ["scores", "token_ids", "translation"]
    assert ids["token_ids"].shape.as_list() == [None, saved_translator.max_length]


def test_matches_the_python_translator(run, saved_translator):
    python = Translator(run.model, run.source_tokenizer, run.target_tokenizer, jit_compile=False)
    texts = SENTENCES + [" ".join(SENTENCES * 10)]  # the last one is truncated as in training
    exported = saved_translator.translate(texts)
    assert exported == python.translate(texts)
    assert len(set(exported)) > 1 and all(exported), exported  # non-trivial outputs
    assert saved_translator.translate(texts, beam_size=4) == python.translate(texts, beam_size=4)


def test_translation_does_not_depend_on_the_batch(saved_translator):
    texts = SENTENCES + [BAD_INPUTS[3], ""]
    alone = [saved_translator.translate([t], beam_size=b)[0] for b in (1, 4) for t in texts]
    together = saved_translator.translate(texts) + saved_translator.translate(texts, beam_size=4)
    assert together == alone
    reversed_batch = saved_translator.translate(texts[::-1], batch_size=3)[::-1]
    assert reversed_batch == alone[: len(texts)]


@pytest.mark.parametrize("beam_size", [1, 4])
def test_bad_inputs_return_strings(saved_translator, beam_size):
    outputs = saved_translator.translate(BAD_INPUTS, beam_size=beam_size)
    assert len(outputs) == len(BAD_INPUTS) and all(isinstance(o, str) for o in outputs)
    assert outputs[:3] == ["", "", ""]  # nothing to translate
    raw = saved_translator.signatures["serving_default"](text=tf.constant([b"", b"\xff\xfe", b"\x00", b"a" * 10000]))
    assert raw["translation"].dtype == tf.string and raw["translation"].shape == (4,)


def test_translate_with_ids_returns_tokens_and_scores(run, saved_translator):
    translations, token_ids, scores = saved_translator.translate_with_ids(SENTENCES + [""])
    assert translations == saved_translator.translate(SENTENCES + [""])
    assert token_ids.dtype == np.int32 and token_ids.shape == (len(SENTENCES) + 1, saved_translator.max_length)
    detokenized = run.target_tokenizer.detokenize(token_ids).numpy()
    assert [t.decode("utf-8") for t in detokenized] == translations
    assert not token_ids[-1].any() and scores[-1] == 0.0
    assert np.all(scores[:-1] < 0.0) and np.all(np.isfinite(scores))
    # Greedy scores are what beam search (width 1 is greedy) reports: length-penalized log-probabilities.
    source_ids = encode_sources(run.source_tokenizer, SENTENCES, run.model_config.max_length)
    tokens, expected = beam_search(run.model, source_ids, 24, run.target_tokenizer.start_id,
                                   run.target_tokenizer.end_id, beam_size=1, return_scores=True)
    np.testing.assert_array_equal(np.asarray(tokens), token_ids[:-1, : np.asarray(tokens).shape[1]])
    np.testing.assert_allclose(np.asarray(expected), scores[:-1], rtol=1e-4, atol=1e-4)


def test_empty_batch(saved_translator):
    assert saved_translator.translate([]) == []
    raw = saved_translator.signatures["serving_default"](text=tf.constant([], dtype=tf.string))
    assert raw["translation"].shape == (0,)


def test_fixed_settings_are_checked(saved_translator):
    assert saved_translator.max_length == 24 and saved_translator.beam_size == 1
    assert saved_translator.config()["max_length"] == 24
    with pytest.raises(ValueError, match="beam sizes \\[1, 4\\], not 3"):
        saved_translator.translate(["a"], beam_size=3)
    with pytest.raises(ValueError, match="at most 24 tokens"):
        saved_translator.translate(["a"], max_length=10)
    with pytest.raises(ValueError, match="needs a run directory"):
        saved_translator.plot_attention("a", "x.png")


def test_missing_directory_names_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="saved_model.pb"):
        SavedModelTranslator(str(tmp_path))
