import keras
import numpy as np
import pytest

from keras_transformer.training import MaskedAccuracy


def test_accuracy_ignores_padding_and_accumulates():
    metric = MaskedAccuracy()
    labels = np.array([[1, 2, 0, 0]])
    logits = np.eye(3, dtype="float32")[[[1, 0, 0, 0]]]  # right, wrong, then padding predicted as id 0
    metric.update_state(labels, logits)
    assert float(metric.result()) == 0.5
    metric.update_state(np.array([[2, 0]]), np.eye(3, dtype="float32")[[[2, 1]]])
    assert float(metric.result()) == pytest.approx(2 / 3)
    metric.reset_state()
    assert float(metric.result()) == 0.0


def test_sample_weight():
    metric = MaskedAccuracy()
    labels = np.array([[1, 1], [1, 1]])
    logits = np.eye(2, dtype="float32")[[[1, 1], [0, 0]]]
    metric.update_state(labels, logits, sample_weight=np.array([3.0, 1.0]))
    assert float(metric.result()) == 0.75


def test_serialization_round_trip():
    metric = MaskedAccuracy(pad_id=5, name="acc")
    restored = keras.metrics.deserialize(keras.metrics.serialize(metric))
    assert isinstance(restored, MaskedAccuracy) and restored.pad_id == 5 and restored.name == "acc"
