"""An ensemble directory exported as one SavedModel and one TFLite model: the same translations and scores as the
Python ensemble decoders (`Translator` over the members), which the member alone does not give."""

import json
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import cli
from keras_transformer.decoding.translator import Translator
from keras_transformer.decoding.translator import encode_sources
from keras_transformer.runs.ensemble import load_ensemble
from tests.export.helpers import BAD_INPUTS
from tests.export.helpers import MODEL_SETTINGS
from tests.export.helpers import SENTENCES

LENGTH_PENALTY = 0.8


@pytest.fixture(scope="module")
def ensemble(run_dir, tmp_path_factory):
    """An ensemble directory of the tiny run and a second run with the same tokenizers and other random weights,
    its tuned decoding written as `tune` would, exported once (greedy serving signature, beam 4 as the extra one)."""
    from keras_transformer import TransformerConfig
    from keras_transformer.models import TransformerModel

    root = tmp_path_factory.mktemp("ensemble")
    other = str(root / "other-run")
    shutil.copytree(run_dir, other)
    with open(os.path.join(run_dir, "config.json"), encoding="utf-8") as f:
        model_config = json.load(f)["model"]
    keras.utils.set_random_seed(7)
    TransformerModel(TransformerConfig.from_dict(model_config)).save(os.path.join(other, "model.keras"))
    ens = str(root / "ens")
    assert cli.main(["ensemble", run_dir, other, "--output", ens]) == 0
    with open(os.path.join(ens, "decoding.json"), "w", encoding="utf-8") as f:
        json.dump({"beam_size": 4, "length_penalty": LENGTH_PENALTY}, f)
    paths = {"saved_model": str(root / "saved_model"), "tflite": str(root / "ens.tflite")}
    assert cli.main(["export", ens, "--saved-model", paths["saved_model"], "--tflite", paths["tflite"],
                     "--beam-size", "1"]) == 0
    return ens, paths


def test_the_saved_model_decodes_like_the_python_ensemble(ensemble, run):
    from keras_transformer.translators import SavedModelTranslator

    ens, paths = ensemble
    members = load_ensemble(ens)
    python = Translator(members.models, members.source_tokenizer, members.target_tokenizer)
    saved = SavedModelTranslator(paths["saved_model"])
    greedy = python.translate(SENTENCES)
    assert saved.translate(SENTENCES) == greedy
    # The extra signature is beam search with the ensemble's tuned length penalty (decoding.json).
    assert saved.translate(SENTENCES, beam_size=4) == python.translate(SENTENCES, beam_size=4,
                                                                       length_penalty=LENGTH_PENALTY)
    # It is the ensemble, not its first member, that was exported.
    alone = Translator(run.model, run.source_tokenizer, run.target_tokenizer).translate(SENTENCES)
    assert alone != greedy
    assert saved.translate(BAD_INPUTS)[:3] == ["", "", ""]


def _expected_scores(members, texts, tokens, combine="log_prob"):
    """The length-penalized score of each output, from the members' own logits (float64) and `combine`."""
    source_ids = np.asarray(encode_sources(members.source_tokenizer, texts, MODEL_SETTINGS["max_length"]))
    start = members.target_tokenizer.start_id
    expected = []
    for row in range(len(texts)):
        out = [int(t) for t in tokens[row] if t != 0]
        decoder_inputs = np.array([[start] + out[:-1]], "int32")
        log_probs = []
        for model in members.models:
            logits = np.asarray(model({"encoder_inputs": source_ids[row: row + 1], "decoder_inputs": decoder_inputs},
                                      training=False))[0].astype("float64")
            logits -= logits.max(-1, keepdims=True)
            log_probs.append(logits - np.log(np.exp(logits).sum(-1, keepdims=True)))
        if combine == "prob":
            mean = np.log(np.mean(np.exp(log_probs), axis=0))
        else:
            mean = np.mean(log_probs, axis=0)
        mean[:, [0, start]] = -np.inf  # padding and the start token are never generated
        mean -= mean.max(-1, keepdims=True)
        mean -= np.log(np.exp(mean).sum(-1, keepdims=True))
        total = sum(mean[i, t] for i, t in enumerate(out))
        expected.append(total / (((5 + len(out)) / 6) ** LENGTH_PENALTY))
    return np.array(expected)


def test_the_saved_model_scores_are_the_ensembles_mean_log_probabilities(ensemble):
    ens, paths = ensemble
    members = load_ensemble(ens)
    module = tf.saved_model.load(paths["saved_model"])
    np.testing.assert_allclose(module.length_penalty.numpy(), LENGTH_PENALTY)
    outputs = module.signatures["translate_with_ids"](text=tf.constant(SENTENCES[:3]))
    tokens, scores = outputs["token_ids"].numpy(), outputs["scores"].numpy()
    np.testing.assert_allclose(scores, _expected_scores(members, SENTENCES[:3], tokens), rtol=1e-4, atol=1e-4)


def test_an_ensemble_of_probabilities_exports_with_its_rule(ensemble):
    """`ensemble --combine prob` reaches the exported graph: its scores are the log of the members' mean
    probabilities (not the mean of their log-probabilities), and its settings say so."""
    from keras_transformer.export import TranslatorModule

    ens, _ = ensemble
    members = load_ensemble(ens)
    prob = os.path.join(os.path.dirname(ens), "ens-prob")
    assert cli.main(["ensemble", *[run.directory for run in members.members], "--output", prob,
                     "--combine", "prob"]) == 0
    loaded = load_ensemble(prob)
    assert (loaded.combine, members.combine) == ("prob", "log_prob")
    module = TranslatorModule.from_run(prob, length_penalty=LENGTH_PENALTY, jit_compile=False)
    assert module.get_config()["ensemble_combine"] == "prob"
    assert TranslatorModule.from_run(ens).get_config()["ensemble_combine"] == "log_prob"
    outputs = module.translate_with_ids(tf.constant(SENTENCES[:3]))
    tokens, scores = outputs["token_ids"].numpy(), outputs["scores"].numpy()
    np.testing.assert_allclose(scores, _expected_scores(loaded, SENTENCES[:3], tokens, "prob"), rtol=1e-4, atol=1e-4)
    assert not np.allclose(scores, _expected_scores(loaded, SENTENCES[:3], tokens, "log_prob"), rtol=1e-4, atol=1e-4)


def test_the_tflite_model_translates_like_the_saved_model(ensemble):
    from keras_transformer.translators import SavedModelTranslator
    from keras_transformer.translators import TFLiteTranslator

    ens, paths = ensemble
    inputs = SENTENCES + BAD_INPUTS
    assert TFLiteTranslator(paths["tflite"]).translate(inputs) == \
        SavedModelTranslator(paths["saved_model"]).translate(inputs)
