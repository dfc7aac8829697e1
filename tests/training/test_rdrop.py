"""R-Drop (`rdrop`): each batch twice through the model, a KL term between the two dropout passes."""

import json
import os

import numpy as np
import pytest

from keras_transformer.data.synthetic import make_synthetic_corpus
from keras_transformer.models import TransformerConfig
from keras_transformer.models import TransformerModel
from keras_transformer.training.distribution import DistributionConfig
from keras_transformer.training.trainer import train
from keras_transformer.validation import SettingError

MODEL = dict(num_layers=1, d_model=32, num_heads=2, d_ff=64, max_length=32, dropout=0.3, word_dropout=0.1)
TRAINING = dict(epochs=2, vocab_size=200, batch_size=32, jit_compile=False, warmup_steps=20, rdrop=2.0)


def test_the_two_copies_of_an_example_get_different_dropout_masks():
    # Without this the KL term would be 0 in training too, and R-Drop a no-op.
    model = TransformerModel(TransformerConfig(src_vocab_size=50, tgt_vocab_size=50, **MODEL))
    rng = np.random.default_rng(0)
    inputs = {name: rng.integers(4, 50, size=(3, 10)).astype("int32") for name in ("encoder_inputs", "decoder_inputs")}
    doubled = {name: np.concatenate([x, x]) for name, x in inputs.items()}
    trained = np.asarray(model(doubled, training=True))
    assert np.abs(trained[:3] - trained[3:]).max() > 1e-3
    inferred = np.asarray(model(doubled, training=False))
    np.testing.assert_allclose(inferred[:3], inferred[3:], atol=1e-5)


def test_a_run_with_rdrop_trains_and_records_it(tmp_path):
    corpus = make_synthetic_corpus(300, seed=3)
    val = make_synthetic_corpus(40, seed=4)
    run = train(corpus, str(tmp_path / "run"), val_data=val, model_settings=MODEL, training_settings=TRAINING,
                verbose=0)
    assert run.training_config.rdrop == 2.0
    with open(tmp_path / "run" / "config.json") as f:
        assert json.load(f)["training"]["rdrop"] == 2.0
    with open(tmp_path / "run" / "history.json") as f:
        epochs = json.load(f)["epochs"]
    assert len(epochs) == 2
    assert all(np.isfinite(e["loss"]) and np.isfinite(e["val_loss"]) for e in epochs)
    assert epochs[1]["loss"] < epochs[0]["loss"]
    assert os.path.exists(tmp_path / "run" / "model.keras")


def test_rdrop_is_refused_with_a_distribution_and_when_negative(tmp_path):
    corpus = make_synthetic_corpus(50, seed=3)
    with pytest.raises(ValueError, match="rdrop is not supported with --distribute"):
        train(corpus, str(tmp_path / "run"), model_settings=MODEL, training_settings=TRAINING, verbose=0,
              distribution=DistributionConfig(mode="mirrored"))
    with pytest.raises(SettingError, match=r"rdrop \(--rdrop\) = -1.0"):
        train(corpus, str(tmp_path / "run"), model_settings=MODEL, training_settings={**TRAINING, "rdrop": -1.0},
              verbose=0)
