"""The public API at the top level: every name has a docstring with an example, and every example runs.

Examples that need a trained run, an exported SavedModel, a TFLite file or a CTranslate2 directory get them as
`run_dir`, `saved_model_dir`, `tflite_path` and `ctranslate2_dir` (built once here, as a reader would with `train`
and `export_run`), and an empty directory as `tmp`.
"""

import doctest
import os
import warnings

import pytest

import keras_transformer


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    from keras_transformer.data import make_synthetic_corpus

    root = tmp_path_factory.mktemp("public-api")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        keras_transformer.train(make_synthetic_corpus(300, seed=0), str(root / "run"),
                                model_settings={"num_layers": 1, "d_model": 32, "num_heads": 2, "d_ff": 64,
                                                "max_length": 32},
                                training_settings={"epochs": 1, "vocab_size": 200, "jit_compile": False}, verbose=0)
    paths = keras_transformer.export_run(str(root / "run"), saved_model=str(root / "saved"),
                                         tflite=str(root / "t.tflite"), ctranslate2=str(root / "ct2"), max_length=8,
                                         verbose=0)
    artifacts = {"run_dir": str(root / "run"), "saved_model_dir": paths["saved_model"], "tflite_path": paths["tflite"],
                 "ctranslate2_dir": paths["ctranslate2"]}
    try:  # an OPUS-MT checkpoint in the Hugging Face layout, for the pretrained-model examples
        from tests.importers.marian_files import make_marian_checkpoint

        make_marian_checkpoint(str(root / "opus-mt-de-en"), d_model=16, layers=1, heads=2, ffn=32)
        artifacts["checkpoint_dir"] = str(root / "opus-mt-de-en")
    except ImportError:  # without the hf extra
        pass
    return artifacts


PUBLIC = [name for name in keras_transformer.__all__
          if not name.startswith("__") and name not in ("layers", "decoding")]


def test_the_top_level_names():
    assert {"train", "load_run", "Run", "TrainingConfig", "Translator", "export_run", "load_translator",
            "SavedModelTranslator", "TFLiteTranslator", "CTranslate2Translator", "PositionalEmbedding",
            "MultiHeadAttention", "TransformerEncoder", "TransformerDecoder", "build_transformer"} <= set(PUBLIC)


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_has_an_example_that_runs(name, artifacts, tmp_path):
    if name in ("import_checkpoint", "import_marian", "SentencePieceTokenizer") and "checkpoint_dir" not in artifacts:
        pytest.skip("needs the hf extra (transformers, sentencepiece)")
    obj = getattr(keras_transformer, name)
    module = __import__(obj.__module__, fromlist=["_"])
    tests = doctest.DocTestFinder(recurse=False).find(obj, name, module=module,
                                                      globs={**vars(module), **artifacts, "tmp": str(tmp_path)})
    examples = [e for t in tests for e in t.examples if not e.options.get(doctest.SKIP)]
    assert examples, f"{name}: no runnable example in its docstring"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        for test in tests:
            runner.run(test)
    finally:
        os.chdir(cwd)
    assert runner.failures == 0, f"{name}: {runner.failures} failing example(s) (run with -s to see them)"


def test_keras_load_model_opens_a_runs_model_after_importing_the_package(artifacts):
    """A Keras user's `keras.saving.load_model(RUN/model.keras)` after `import keras_transformer` (safe mode, in a
    fresh process): the schedule, loss, metric and layers are registered, and the model gives the run's logits."""
    import json
    import subprocess
    import sys

    import numpy as np

    path = os.path.join(artifacts["run_dir"], "model.keras")
    inputs = {"encoder_inputs": np.array([[2, 5, 6, 7, 3]], "int32"), "decoder_inputs": np.array([[2, 5, 6]], "int32")}
    as_json = json.dumps({k: v.tolist() for k, v in inputs.items()})
    code = ("import json, sys\nimport numpy as np\nimport keras_transformer\nimport keras\n"
            f"model = keras.saving.load_model({path!r})\n"
            f"inputs = {{k: np.array(v, 'int32') for k, v in json.loads({as_json!r}).items()}}\n"
            "print(json.dumps(np.asarray(model(inputs)).tolist()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    expected = np.asarray(keras_transformer.load_run(artifacts["run_dir"]).model(inputs))
    np.testing.assert_allclose(np.array(json.loads(out.stdout.strip().splitlines()[-1])), expected, atol=1e-5)
