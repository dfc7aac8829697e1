import keras
import numpy as np
import pytest

from keras_transformer.training import MaskedSparseCategoricalCrossentropy


def reference_loss(labels, logits, smoothing, pad_id=0, weights=None):
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    vocab = logits.shape[-1]
    total = 0.0
    count = 0.0
    for index in np.ndindex(labels.shape):
        if labels[index] == pad_id:
            continue
        target = np.full(vocab, smoothing / vocab)
        target[labels[index]] += 1.0 - smoothing
        weight = 1.0 if weights is None else weights[index[0]]
        total += weight * -(target * log_probs[index]).sum()
        count += weight
    return total / count


@pytest.fixture
def example():
    rng = np.random.default_rng(0)
    labels = np.array([[5, 2, 7, 0, 0], [1, 3, 0, 0, 0]])
    logits = rng.normal(size=(2, 5, 11)).astype("float32")
    return labels, logits


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_equals_hand_computation(example, smoothing):
    labels, logits = example
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=smoothing)
    np.testing.assert_allclose(float(loss(labels, logits)), reference_loss(labels, logits, smoothing), rtol=1e-5)


def test_padding_positions_do_not_change_the_loss(example):
    labels, logits = example
    loss = MaskedSparseCategoricalCrossentropy()
    changed = logits.copy()
    changed[labels == 0] = 100.0 * np.random.default_rng(1).normal(size=changed[labels == 0].shape)
    assert float(loss(labels, logits)) == pytest.approx(float(loss(labels, changed)), rel=1e-6)
    # More padding columns do not dilute the mean either.
    wider_labels = np.pad(labels, [[0, 0], [0, 4]])
    wider_logits = np.pad(logits, [[0, 0], [0, 4], [0, 0]])
    assert float(loss(wider_labels, wider_logits)) == pytest.approx(float(loss(labels, logits)), rel=1e-6)


def test_sample_weight_weights_sequences(example):
    labels, logits = example
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.1)
    weights = np.array([2.0, 0.5], "float32")
    expected = reference_loss(labels, logits, 0.1, weights=weights)
    np.testing.assert_allclose(float(loss(labels, logits, sample_weight=weights)), expected, rtol=1e-5)


def test_none_reduction_gives_per_token_losses_zero_at_padding(example):
    labels, logits = example
    per_token = keras.ops.convert_to_numpy(
        MaskedSparseCategoricalCrossentropy(reduction=None)(labels, logits)
    )
    assert per_token.shape == labels.shape
    assert (per_token[labels == 0] == 0).all() and (per_token[labels != 0] > 0).all()


def test_fit_with_keras_masked_logits_matches_hand_computation(example):
    # Logits that carry a Keras mask (Embedding(mask_zero) -> Dense) must not be masked twice.
    labels, _ = example
    inputs = keras.Input(shape=(5,), dtype="int32")
    hidden = keras.layers.Embedding(20, 4, mask_zero=True)(inputs)
    logits = keras.layers.Dense(11)(hidden)
    model = keras.Model(inputs, logits)
    model.compile(loss=MaskedSparseCategoricalCrossentropy(label_smoothing=0.1))
    tokens = np.where(labels > 0, labels + 1, 0)
    predicted = model.predict(tokens, verbose=0)
    evaluated = model.evaluate(tokens, labels, verbose=0)
    np.testing.assert_allclose(evaluated, reference_loss(labels, predicted, 0.1), rtol=1e-5)


def test_serialization_round_trip():
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.2, pad_id=3)
    restored = keras.losses.deserialize(keras.losses.serialize(loss))
    assert isinstance(restored, MaskedSparseCategoricalCrossentropy)
    assert (restored.label_smoothing, restored.pad_id) == (0.2, 3)


def test_rejects_invalid_smoothing():
    with pytest.raises(ValueError, match="label_smoothing"):
        MaskedSparseCategoricalCrossentropy(label_smoothing=1.0)


def log_softmax(logits):
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def test_rdrop_adds_alpha_times_the_symmetric_kl_of_each_pair(example):
    # A batch of two examples, each twice (rows i and i + 2), with different logits for the two copies.
    labels, logits = example
    other = logits + np.random.default_rng(2).normal(size=logits.shape).astype("float32")
    paired_labels = np.concatenate([labels, labels])
    paired_logits = np.concatenate([logits, other])
    p, q = log_softmax(logits.astype("float64")), log_softmax(other.astype("float64"))
    kl_pq = (np.exp(p) * (p - q)).sum(-1)
    kl_qp = (np.exp(q) * (q - p)).sum(-1)
    real = labels != 0
    # The paper's pair loss: CE(p) + CE(q) + alpha * (KL(p||q) + KL(q||p)) / 2, here averaged over the 2n rows' tokens.
    cross_entropy = reference_loss(paired_labels, paired_logits, 0.1)
    expected = cross_entropy + 3.0 * ((kl_pq + kl_qp)[real].sum() / 2) / (2 * real.sum())
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.1, rdrop=3.0)
    np.testing.assert_allclose(float(loss(paired_labels, paired_logits)), expected, rtol=1e-5)
    assert expected > cross_entropy + 0.1  # the term is really there
    # Two identical copies (inference: no dropout) add nothing.
    same = np.concatenate([logits, logits])
    np.testing.assert_allclose(float(loss(paired_labels, same)), reference_loss(paired_labels, same, 0.1), rtol=1e-5)


def test_rdrop_ignores_padding_positions(example):
    labels, logits = example
    paired_labels = np.concatenate([labels, labels])
    paired_logits = np.concatenate([logits, logits + 1.0 * (labels != 0)[..., None] * logits])
    changed = paired_logits.copy()
    changed[paired_labels == 0] = 50.0 * np.random.default_rng(3).normal(size=changed[paired_labels == 0].shape)
    loss = MaskedSparseCategoricalCrossentropy(rdrop=5.0)
    assert float(loss(paired_labels, paired_logits)) == pytest.approx(float(loss(paired_labels, changed)), rel=1e-6)


def test_rdrop_refuses_a_batch_that_cannot_hold_pairs(example):
    labels, logits = example
    with pytest.raises(ValueError, match="needs each example twice"):
        MaskedSparseCategoricalCrossentropy(rdrop=1.0)(labels[:1], logits[:1])
    with pytest.raises(ValueError, match="rdrop"):
        MaskedSparseCategoricalCrossentropy(rdrop=-1.0)


def test_rdrop_survives_serialization():
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.1, rdrop=5.0)
    restored = keras.losses.deserialize(keras.losses.serialize(loss))
    assert restored.rdrop == 5.0
