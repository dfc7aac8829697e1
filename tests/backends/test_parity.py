"""A model built and saved on TensorFlow gives the same logits, tokens and training losses on JAX and PyTorch."""

import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_transformer import build_transformer
from tests.backends import parity_worker

ROOT = pathlib.Path(__file__).parents[2]
BACKENDS = ["tensorflow", "jax", "torch"]


def _run(backend, model_path, data_path, out_path):
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-m", "tests.backends.parity_worker", model_path, data_path, out_path],
                            env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, f"{backend}: {result.stderr[-3000:]}"
    return np.load(out_path)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Each backend's outputs, from one `.keras` file written on TensorFlow (this process's backend)."""
    assert keras.backend.backend() == "tensorflow"
    root = tmp_path_factory.mktemp("parity")
    keras.utils.set_random_seed(11)
    model = build_transformer(40, 40, num_layers=2, d_model=32, num_heads=4, d_ff=64, dropout=0.0,
                              norm_first=True, share_embeddings=True, tie_output=True, max_length=16)
    model.save(root / "model.keras")
    rng = np.random.default_rng(0)
    src = rng.integers(3, 40, (4, 7)).astype("int32")
    src[2, 4:] = 0
    train_src = rng.integers(3, 40, (48, 7)).astype("int32")
    train_dec = np.concatenate([np.ones((48, 1), "int32"), train_src[:, :6]], axis=1)
    np.savez(root / "data.npz", src=src, dec=rng.integers(3, 40, (4, 5)).astype("int32"), train_src=train_src,
             train_dec=train_dec, train_labels=train_src)
    # TensorFlow's outputs in this process (it is on TensorFlow); the other backends' each in a process of its own.
    parity_worker.main(str(root / "model.keras"), str(root / "data.npz"), str(root / "tensorflow.npz"))
    outputs = {b: _run(b, str(root / "model.keras"), str(root / "data.npz"), str(root / f"{b}.npz"))
               for b in BACKENDS if b != "tensorflow"}
    outputs["tensorflow"] = np.load(root / "tensorflow.npz")
    outputs["root"] = root
    return outputs


@pytest.mark.tensorflow_only  # it drives the other backends from the TensorFlow run
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_logits_tokens_and_losses_match_tensorflow(results, backend):
    reference, other = results["tensorflow"], results[backend]
    assert str(other["backend"]) == backend
    logit_gap = float(np.abs(other["logits"] - reference["logits"]).max())
    loss_gap = float(np.abs(other["losses"] - reference["losses"]).max())
    print(f"\n{backend} vs tensorflow: max |logit difference| {logit_gap:.2e}; greedy tokens equal "
          f"{np.array_equal(other['greedy'], reference['greedy'])}; beam tokens equal "
          f"{np.array_equal(other['beam'], reference['beam'])}; max |beam score difference| "
          f"{float(np.abs(other['scores'] - reference['scores']).max()):.2e}; losses {np.round(other['losses'], 5)} "
          f"vs {np.round(reference['losses'], 5)}; max |loss difference| {loss_gap:.2e}")
    assert logit_gap < 1e-4
    np.testing.assert_array_equal(other["greedy"], reference["greedy"])
    np.testing.assert_array_equal(other["beam"], reference["beam"])
    np.testing.assert_allclose(other["scores"], reference["scores"], atol=1e-4)
    assert reference["losses"][-1] < reference["losses"][0]  # the steps really train
    assert loss_gap < 1e-3


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_a_model_trained_on_another_backend_loads_on_tensorflow(results, backend):
    """What export needs: a `.keras` file written after `fit()` on JAX or PyTorch gives the same logits here."""
    import keras_transformer.models  # noqa: F401

    model = keras.saving.load_model(results["root"] / f"{backend}.npz.keras")
    data = np.load(results["root"] / "data.npz")
    logits = keras.ops.convert_to_numpy(model({"encoder_inputs": data["src"], "decoder_inputs": data["dec"]},
                                              training=False))
    np.testing.assert_allclose(logits, results[backend]["trained_logits"], atol=1e-4)
    assert np.abs(logits - results["tensorflow"]["logits"]).max() > 1e-3  # it is the trained model, not the first
