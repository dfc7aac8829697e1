"""`fit()` on the backend this run uses (TensorFlow, JAX or PyTorch): the loss falls, in float32 and bfloat16."""

import keras
import numpy as np
import pytest

from keras_transformer import build_transformer


def _copy_task():
    rng = np.random.default_rng(0)
    src = rng.integers(3, 20, (16, 6)).astype("int32")
    dec = np.concatenate([np.ones((16, 1), "int32"), src[:, :5]], axis=1)
    return {"encoder_inputs": src, "decoder_inputs": dec}, src


@pytest.mark.every_case  # the cases vary what the backend computes (dtypes, compilation)
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_a_few_fit_steps_make_the_loss_fall(policy):
    keras.config.set_dtype_policy(policy)
    keras.utils.set_random_seed(0)
    model = build_transformer(20, 20, num_layers=1, d_model=32, num_heads=4, d_ff=64, dropout=0.0, max_length=8)
    model.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    inputs, labels = _copy_task()
    history = model.fit(inputs, labels, batch_size=16, epochs=30, verbose=0).history["loss"]
    assert np.all(np.isfinite(history))
    assert history[-1] < 0.6 * history[0], history
    logits = model(inputs, training=False)
    # Mixed precision computes in bfloat16 and keeps the output logits in float32 (the projection's dtype policy).
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    if policy == "mixed_bfloat16":
        attention = model.get_layer("decoder_layer_0")
        assert attention.compute_dtype == "bfloat16" and attention.variable_dtype == "float32"


def test_a_keras_file_round_trip_gives_the_same_logits(tmp_path):
    keras.utils.set_random_seed(1)
    model = build_transformer(20, 20, num_layers=1, d_model=32, num_heads=4, d_ff=64, max_length=8)
    inputs, _ = _copy_task()
    before = keras.ops.convert_to_numpy(model(inputs, training=False))
    model.save(tmp_path / "model.keras")
    again = keras.saving.load_model(tmp_path / "model.keras")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(again(inputs, training=False)), before, atol=1e-6)
