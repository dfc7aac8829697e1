"""keras-hub's own API on the package's model, one test per entry point, on every Keras backend.

`from_preset` (task, backbone, tokenizer, preprocessor), `fit` on strings, `generate` with the package's samplers
and keras-hub's, `enable_lora`, `quantize("int8")`, `save_to_preset` + `upload_preset` (the network calls mocked).
"""

import json
import os

import keras
import keras_hub
import numpy as np
import pytest

from keras_transformer.data.synthetic import make_synthetic_corpus
from keras_transformer.decoding.samplers import BeamSampler
from keras_transformer.decoding.samplers import GreedySampler
from keras_transformer.models import TransformerBackbone
from keras_transformer.tasks import TransformerSeq2SeqLM
from keras_transformer.tasks import TransformerSeq2SeqLMPreprocessor
from keras_transformer.tasks import TransformerTokenizer
from tests.export.helpers import SENTENCES


def _logits(task, texts):
    x, _, _ = task.preprocessor((texts, texts))
    return keras.ops.convert_to_numpy(task.backbone(x))


@pytest.fixture(scope="module")
def preset(trained, tmp_path_factory):
    task, _, _ = trained
    return task.save_to_preset(str(tmp_path_factory.mktemp("preset") / "dates"))


def test_the_classes_are_keras_hubs_and_registered():
    assert issubclass(TransformerSeq2SeqLM, keras_hub.models.Seq2SeqLM)
    assert issubclass(TransformerBackbone, keras_hub.models.Backbone)
    assert issubclass(TransformerSeq2SeqLMPreprocessor, keras_hub.models.Seq2SeqLMPreprocessor)
    assert issubclass(TransformerTokenizer, keras_hub.tokenizers.Tokenizer)
    for cls in (TransformerSeq2SeqLM, TransformerBackbone, TransformerSeq2SeqLMPreprocessor, TransformerTokenizer):
        assert keras.saving.get_registered_object(f"keras_transformer>{cls.__name__}") is cls
    assert isinstance(GreedySampler(), keras_hub.samplers.Sampler)


def test_from_preset_round_trip_gives_equal_logits(trained, preset):
    task, _, _ = trained
    assert sorted(os.listdir(preset)) == ["assets", "config.json", "metadata.json", "model.weights.h5",
                                          "preprocessor.json", "target_tokenizer.json", "task.json",
                                          "tokenizer.json"]
    loaded = keras_hub.models.Seq2SeqLM.from_preset(preset)
    assert type(loaded) is TransformerSeq2SeqLM
    np.testing.assert_allclose(_logits(loaded, SENTENCES), _logits(task, SENTENCES), atol=1e-5)
    assert loaded.generate(SENTENCES) == task.generate(SENTENCES)
    backbone = keras_hub.models.Backbone.from_preset(preset)
    assert type(backbone) is TransformerBackbone
    x, _, _ = task.preprocessor((SENTENCES, SENTENCES))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(backbone(x)), _logits(task, SENTENCES), atol=1e-5)
    assert loaded.preprocessor.encoder_sequence_length == task.preprocessor.encoder_sequence_length
    assert loaded.preprocessor.decoder_sequence_length == task.preprocessor.decoder_sequence_length
    preprocessor = keras_hub.models.Seq2SeqLMPreprocessor.from_preset(preset)
    assert type(preprocessor) is TransformerSeq2SeqLMPreprocessor
    mine, theirs = preprocessor((SENTENCES, SENTENCES))[0], x
    for key in ("encoder_inputs", "decoder_inputs"):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(mine[key]), keras.ops.convert_to_numpy(theirs[key]))
    assert isinstance(loaded.sampler, GreedySampler)  # the sampler generate() decoded with
    tokenizer = keras_hub.tokenizers.Tokenizer.from_preset(preset)
    assert type(tokenizer) is TransformerTokenizer
    assert tokenizer.vocabulary_size() == task.preprocessor.tokenizer.vocabulary_size()


def test_fit_on_strings_lowers_the_loss(trained):
    _, before, history = trained
    losses = history["loss"]
    assert losses[-1] < 0.5 * losses[0] and losses[-1] < before


def test_fit_takes_keras_hubs_dict_and_x_y(trained, corpus):
    task, _, _ = trained
    pairs = {"encoder_text": corpus.sources[:8], "decoder_text": corpus.targets[:8]}
    as_dict = task.evaluate(x=pairs, batch_size=8, verbose=0)[0]
    as_x_y = task.evaluate(x=corpus.sources[:8], y=corpus.targets[:8], batch_size=8, verbose=0)[0]
    as_pair = task.evaluate(x=(corpus.sources[:8], corpus.targets[:8]), batch_size=8, verbose=0)[0]
    assert as_dict == pytest.approx(as_x_y, rel=1e-5) and as_dict == pytest.approx(as_pair, rel=1e-5)


def test_generate_takes_a_string_or_a_list(trained):
    task, _, _ = trained
    one = task.generate(SENTENCES[0])
    assert isinstance(one, str)
    outputs = task.generate(SENTENCES)
    assert isinstance(outputs, list) and outputs[0] == one
    assert outputs == task.translate(SENTENCES)


def test_our_greedy_sampler_and_keras_hubs_give_equal_tokens(trained):
    task, _, _ = trained
    texts = make_synthetic_corpus(24, seed=11).sources
    ours = task.generate(texts)
    try:
        task.compile(sampler="greedy")
        assert isinstance(task.sampler, keras_hub.samplers.GreedySampler)
        assert not isinstance(task.sampler, GreedySampler)
        assert task.generate(texts) == ours
    finally:
        task.compile(sampler=GreedySampler())


def test_our_beam_sampler_decodes_as_the_translators_beam_search(trained):
    task, _, _ = trained
    try:
        task.compile(sampler=BeamSampler(num_beams=3))
        assert task.generate(SENTENCES) == task.translator.translate(SENTENCES, beam_size=3)
        config = task.get_config()["sampler"]  # what a preset keeps
        assert config == {"class_name": "BeamSampler", "config": BeamSampler(num_beams=3).get_config()}
        restored = TransformerSeq2SeqLM.from_config(task.get_config())
        assert isinstance(restored.sampler, BeamSampler) and restored.sampler.num_beams == 3
        task.compile(sampler=keras_hub.samplers.BeamSampler(num_beams=3))
        assert all(isinstance(text, str) for text in task.generate(SENTENCES))
        restored = TransformerSeq2SeqLM.from_config(task.get_config())
        assert type(restored.sampler) is keras_hub.samplers.BeamSampler
        task.compile(sampler=keras_hub.samplers.TopKSampler(k=3, seed=1))
        assert all(isinstance(text, str) for text in task.generate(SENTENCES))
    finally:
        task.compile(sampler=GreedySampler())


def test_a_seeded_sampler_draws_the_same_tokens_every_call(trained):
    from keras_transformer.decoding.samplers import TopKSampler

    task, _, _ = trained
    try:
        task.compile(sampler=TopKSampler(k=5, temperature=2.0, seed=5))
        first = task.generate(SENTENCES)
        assert task.generate(SENTENCES) == first
        task.compile(sampler=TopKSampler(k=5, temperature=2.0))
        draws = {tuple(task.generate(SENTENCES)) for _ in range(3)}
        assert len(draws) > 1  # unseeded: keras-hub's seed generator moves on
    finally:
        task.compile(sampler=GreedySampler())


def test_generate_keeps_a_target_prompt(trained):
    task, _, _ = trained
    out = task.generate({"encoder_text": SENTENCES[:2], "decoder_text": ["2026", "2026"]})
    assert all(text.replace(" ", "").startswith("2026") for text in out)


def test_lora_trains_only_the_lora_weights(run_dir, corpus):
    task = TransformerSeq2SeqLM.from_run(run_dir)
    base = {id(w): keras.ops.convert_to_numpy(w).copy() for w in task.backbone.weights}
    task.backbone.enable_lora(2)
    trainable = sum(int(np.prod(w.shape)) for w in task.backbone.trainable_weights)
    assert 0 < trainable < 0.05 * task.backbone.count_params()
    lora = [w for w in task.backbone.trainable_weights if "lora" in w.path]
    assert len(lora) == len(task.backbone.trainable_weights) > 0
    lora_before = [keras.ops.convert_to_numpy(w).copy() for w in lora]
    sampler = task.sampler
    task.compile(optimizer=keras.optimizers.Adam(1e-2))
    assert task.sampler is sampler  # compiling for training keeps how generate() decodes
    task.fit(x=(corpus.sources[:64], corpus.targets[:64]), batch_size=32, epochs=1, verbose=0)
    for w in task.backbone.weights:
        if id(w) in base:
            np.testing.assert_array_equal(keras.ops.convert_to_numpy(w), base[id(w)], err_msg=w.path)
    assert any(not np.array_equal(keras.ops.convert_to_numpy(w), b) for w, b in zip(lora, lora_before))


def test_int8_generates_as_float32_on_nine_in_ten_sentences(trained, tmp_path):
    task, _, _ = trained
    texts = make_synthetic_corpus(50, seed=7).sources
    quantized = keras_hub.models.Seq2SeqLM.from_preset(task.save_to_preset(str(tmp_path / "float")))
    float_outputs = quantized.generate(texts)
    float_bytes = sum(int(np.prod(w.shape)) * np.dtype(w.dtype).itemsize for w in quantized.backbone.weights)
    quantized.quantize("int8")
    int8_outputs = quantized.generate(texts)
    agree = sum(a == b for a, b in zip(int8_outputs, float_outputs))
    assert agree >= 45, f"{agree}/50 sentences equal"
    int8_bytes = sum(int(np.prod(w.shape)) * np.dtype(w.dtype).itemsize for w in quantized.backbone.weights)
    assert int8_bytes <= 0.5 * float_bytes, (int8_bytes, float_bytes)
    fresh = keras_hub.models.Seq2SeqLM.from_preset(str(tmp_path / "float"))
    fresh.quantize("int8")  # before any generate() or fit(): the preprocessor is built for Keras' walk
    # The same int8 weights give the same logits (what generate() decodes from; a generate() per model would compile
    # each one's decoding loop again).
    int8_logits = _logits(quantized, texts[:10])
    np.testing.assert_allclose(_logits(fresh, texts[:10]), int8_logits, atol=1e-5)
    reloaded = keras_hub.models.Seq2SeqLM.from_preset(quantized.save_to_preset(str(tmp_path / "int8")))
    assert reloaded.backbone.encoder_layers[0].self_attention.query_dense.quantization_mode == "int8"
    np.testing.assert_allclose(_logits(reloaded, texts[:10]), int8_logits, atol=1e-5)


def test_save_to_preset_then_upload_preset(trained, preset, monkeypatch):
    huggingface_hub = pytest.importorskip("huggingface_hub")
    calls = {}

    class Repo:
        repo_id = "someone/dates"

    def upload_folder(repo_id, folder_path):
        calls["uploaded"] = (repo_id, sorted(os.listdir(folder_path)))

    monkeypatch.setattr(huggingface_hub, "create_repo", lambda repo_id, exist_ok: Repo())
    monkeypatch.setattr(huggingface_hub, "file_exists", lambda repo_id, filename: False)
    monkeypatch.setattr(huggingface_hub, "upload_folder", upload_folder)
    keras_hub.upload_preset("hf://someone/dates", preset)
    repo, names = calls["uploaded"]
    assert repo == "someone/dates" and {"config.json", "model.weights.h5", "task.json", "README.md"} <= set(names)
    assert not os.path.exists(os.path.join(preset, "README.md"))  # keras-hub's model card, removed after upload
    metadata = json.loads(open(os.path.join(preset, "metadata.json"), encoding="utf-8").read())
    assert metadata["keras_hub_version"] == keras_hub.__version__
    with pytest.raises(FileExistsError, match="overwrite"):
        trained[0].save_to_preset(preset)


def test_an_uploaded_preset_loads_from_hf_as_a_preset(trained, preset, monkeypatch):
    """`hf://OWNER/NAME` holding a keras-hub preset loads through keras-hub (a Marian checkpoint there would be
    imported): the Hub's file download is mocked by the local preset directory."""
    huggingface_hub = pytest.importorskip("huggingface_hub")

    def hf_hub_download(repo_id, filename, revision=None, **kwargs):
        assert repo_id == "someone/dates"
        path = os.path.join(preset, filename)
        if not os.path.exists(path):
            raise huggingface_hub.errors.EntryNotFoundError(f"{filename} not in {repo_id}")
        return path

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    loaded = TransformerSeq2SeqLM.from_preset("hf://someone/dates")
    assert loaded.generate(SENTENCES) == trained[0].generate(SENTENCES)


def test_keras_hubs_packer_gives_the_ids_of_the_packages_packer(trained, corpus):
    """The preprocessor packs with keras-hub's `StartEndPacker`; training and the exports pack with `pack_sources`:
    the same ids, row for row (the preprocessor pads to a multiple of 16 columns)."""
    import tensorflow as tf

    from keras_transformer.data.packing import pack_sources

    task, _, _ = trained
    texts = corpus.sources[:40] + ["", "a " * 60]
    inner = task.preprocessor.tokenizer.inner
    ours, _ = pack_sources(inner.tokenize(tf.constant(texts)), inner.source_start_id, inner.end_id,
                           task.preprocessor.encoder_sequence_length)
    ours = ours.numpy()
    theirs = keras.ops.convert_to_numpy(task.preprocessor.pack_sources(texts))
    assert theirs.shape[1] % 16 == 0 or theirs.shape[1] == task.preprocessor.encoder_sequence_length
    np.testing.assert_array_equal(theirs[:, : ours.shape[1]], ours)
    assert not theirs[:, ours.shape[1]:].any()
