"""Shared checks that every layer of the package goes through (see `run_layer_test`)."""

import keras
import numpy as np
from keras import ops


def _to_numpy(x):
    return np.asarray(ops.convert_to_numpy(x))


def _symbolic(value):
    value = np.asarray(value)
    return keras.KerasTensor((None,) + value.shape[1:], dtype=str(value.dtype))


def run_layer_test(
    layer_cls,
    init_kwargs,
    call_inputs,
    expected_output_shape,
    call_kwargs=None,
    run_training=True,
    run_mixed_precision=True,
    run_saving=True,
    tmp_path=None,
):
    """Config round trip, symbolic + eager call, a fit step, mixed precision and a `.keras` round trip.

    `call_inputs` is a list of positional NumPy inputs; the first is the one the `fit()` model
    feeds, the rest are fed as extra model inputs too.
    """
    call_kwargs = call_kwargs or {}

    # 1. Config round trip (and every constructor argument is in the config).
    layer = layer_cls(**init_kwargs)
    config = layer.get_config()
    for name in init_kwargs:
        assert name in config, f"{layer_cls.__name__}.get_config() lacks {name!r}"
    clone = layer_cls.from_config(config)
    assert clone.get_config() == config
    serialized = keras.saving.serialize_keras_object(layer)
    revived = keras.saving.deserialize_keras_object(serialized)
    assert type(revived) is layer_cls

    # 2. Symbolic call gives the expected shape.
    layer = layer_cls(**init_kwargs)
    symbolic_inputs = [_symbolic(x) for x in call_inputs]
    symbolic_out = layer(*symbolic_inputs, **call_kwargs)
    expected_symbolic = (None,) + tuple(expected_output_shape[1:])
    assert tuple(symbolic_out.shape) == expected_symbolic, (symbolic_out.shape, expected_symbolic)

    # 3. Eager call gives the expected shape, finite values, the layer's compute dtype.
    layer = layer_cls(**init_kwargs)
    out = layer(*call_inputs, **call_kwargs)
    assert tuple(out.shape) == tuple(expected_output_shape)
    assert np.all(np.isfinite(_to_numpy(out)))
    assert keras.backend.standardize_dtype(out.dtype) == layer.compute_dtype

    # 4. A fit step in a functional model changes the weights and gives a finite loss.
    if run_training:
        inputs = [keras.Input(shape=np.asarray(x).shape[1:], dtype=str(np.asarray(x).dtype)) for x in call_inputs]
        model_layer = layer_cls(**init_kwargs)
        outputs = model_layer(*inputs, **call_kwargs)
        outputs = keras.layers.Dense(1, dtype="float32")(outputs)
        model = keras.Model(inputs, outputs)
        model.compile(optimizer="adam", loss="mse")
        before = [np.array(w) for w in model_layer.get_weights()]
        target = np.random.rand(*tuple(out.shape[:-1]) + (1,)).astype("float32")
        history = model.fit(list(call_inputs), target, epochs=1, batch_size=len(target), verbose=0)
        assert np.isfinite(history.history["loss"][0])
        after = model_layer.get_weights()
        assert any(not np.allclose(a, b) for a, b in zip(before, after)), "fit() did not train the layer"

    # 5. Mixed precision: the layer computes in the half dtype and stays finite.
    if run_mixed_precision:
        for policy, compute in (("mixed_float16", "float16"), ("mixed_bfloat16", "bfloat16")):
            mixed = layer_cls(**init_kwargs, dtype=policy)
            mixed_out = mixed(*call_inputs, **call_kwargs)
            assert keras.backend.standardize_dtype(mixed_out.dtype) in (compute, "float32")
            assert all(keras.backend.standardize_dtype(w.dtype) == "float32" for w in mixed.weights)
            assert np.all(np.isfinite(_to_numpy(ops.cast(mixed_out, "float32"))))

    # 6. `.keras` round trip reproduces the outputs (safe mode).
    if run_saving:
        inputs = [keras.Input(shape=np.asarray(x).shape[1:], dtype=str(np.asarray(x).dtype)) for x in call_inputs]
        model = keras.Model(inputs, layer_cls(**init_kwargs)(*inputs, **call_kwargs))
        expected = _to_numpy(model(list(call_inputs)))
        path = str(tmp_path / f"{layer_cls.__name__}.keras")
        model.save(path)
        loaded = keras.saving.load_model(path, safe_mode=True)
        np.testing.assert_allclose(_to_numpy(loaded(list(call_inputs))), expected, rtol=1e-5, atol=1e-5)
    return out
