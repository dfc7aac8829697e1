import json

import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer import TransformerConfig
from keras_transformer import build_transformer
from keras_transformer.models import TransformerModel
from keras_transformer.models import TransformerParts


def _np(x):
    return np.asarray(ops.convert_to_numpy(x))


SMALL = dict(num_layers=2, d_model=32, num_heads=4, d_ff=64, max_length=32)
# What an imported M2M-100 / NLLB model sets (importers/m2m_100.py).
M2M_100 = {"norm_first": True, "share_embeddings": True, "tie_output": True, "output_bias": True,
           "position": "sinusoidal_fairseq", "layer_norm_epsilon": 1e-5, "start_logit_from_padding": 2}


def _batch(src_vocab=50, tgt_vocab=60, batch=3):
    rng = np.random.default_rng(0)
    enc = rng.integers(1, src_vocab, (batch, 7)).astype("int32")
    dec = rng.integers(1, tgt_vocab, (batch, 5)).astype("int32")
    enc[0, 4:] = 0
    dec[1, 3:] = 0
    return {"encoder_inputs": enc, "decoder_inputs": dec}


def test_contract_inputs_outputs_and_paper_defaults():
    model = build_transformer(50, 60, **SMALL)
    # A functional model (the contract), typed: its parts are attributes (issue 21).
    assert isinstance(model, keras.Model) and "Functional" in [c.__name__ for c in type(model).__mro__]
    assert type(model).__name__ == "TransformerModel" and len(model.encoder_layers) == SMALL["num_layers"]
    out = model(_batch())
    assert tuple(out.shape) == (3, 5, 60)
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    default = build_transformer(1000, 1000)
    layer = default.get_layer("encoder_layer_5")
    assert (layer.d_model, layer.num_heads, layer.d_ff, layer.dropout) == (512, 8, 2048, 0.1)
    assert "encoder_layer_6" not in [lay.name for lay in default.layers]


@pytest.mark.every_case  # the cases vary what the backend computes (dtypes, compilation)
@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_logits_are_float32_under_mixed_precision(policy):
    keras.config.set_dtype_policy(policy)
    model = build_transformer(50, 60, **SMALL, tie_output=True)
    out = model(_batch())
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    assert np.all(np.isfinite(_np(out)))
    assert model.get_layer("decoder_layer_0").compute_dtype in ("float16", "bfloat16")


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"norm_first": True},
        {"share_embeddings": True, "tie_output": True},
        {"position": "learned", "activation": "gelu"},
        {"position": "none", "use_rotary": True, "use_bias": False},
        {"share_embeddings": True, "tie_output": True, "output_bias": True, "activation": "swish",
         "position": "sinusoidal_concat", "layer_norm_epsilon": 1e-5, "scale_embeddings": False},
        M2M_100,
    ],
    ids=["paper", "pre-norm", "shared-tied", "learned-gelu", "rotary", "marian", "m2m_100"],
)
def test_keras_round_trip_reproduces_outputs(options, tmp_path):
    model = build_transformer(50, 50, **SMALL, **options)
    if model.logits_bias is not None:  # a bias that is not zero, so that the round trip has to keep it
        model.logits_bias.bias.assign(np.linspace(-1, 1, 50).astype("float32"))
    batch = _batch(50, 50)
    expected = _np(model(batch))
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_allclose(_np(loaded(batch)), expected, rtol=1e-5, atol=1e-5)


def test_shared_and_tied_embeddings_share_weights():
    model = build_transformer(50, 50, **SMALL, share_embeddings=True, tie_output=True)
    names = [layer.name for layer in model.layers]
    assert "shared_embedding" in names and "logits" not in names
    untied = build_transformer(50, 50, **SMALL)
    assert model.count_params() == untied.count_params() - 50 * 32 - (50 * 32 + 50)


def test_shared_embeddings_need_one_vocabulary():
    with pytest.raises(ValueError, match="shared vocabulary"):
        build_transformer(50, 60, share_embeddings=True)


def test_padding_does_not_change_outputs():
    model = build_transformer(50, 60, **SMALL)
    batch = _batch()
    out = _np(model(batch))
    enc, dec = batch["encoder_inputs"], batch["decoder_inputs"]
    for row in range(3):
        s = int((enc[row] != 0).sum())
        t = int((dec[row] != 0).sum())
        alone = _np(model({"encoder_inputs": enc[row:row + 1, :s], "decoder_inputs": dec[row:row + 1, :t]}))
        np.testing.assert_allclose(out[row:row + 1, :t], alone, rtol=1e-4, atol=1e-4)


def test_xla_compiles_and_matches_eager():
    model = build_transformer(50, 60, **SMALL)
    batch = _batch()
    eager = _np(model(batch))
    from tests.backend_helpers import compile_function

    compiled = compile_function(lambda b: model(b, training=False))
    np.testing.assert_allclose(_np(compiled(batch)), eager, rtol=1e-4, atol=1e-4)


def test_config_round_trips_through_json_and_builds():
    config = TransformerConfig(src_vocab_size=40, tgt_vocab_size=40, norm_first=True, activation_dropout=0.0, **SMALL)
    again = TransformerConfig.from_json(config.to_json())
    assert again == config
    assert json.loads(config.to_json())["d_model"] == 32
    model = TransformerModel(again)
    assert tuple(model(_batch(40, 40)).shape) == (3, 5, 40)
    assert {model.get_layer(f"{side}_layer_0").activation_dropout for side in ("encoder", "decoder")} == {0.0}
    with pytest.raises(ValueError, match="unknown model setting 'layers'"):
        TransformerConfig.from_dict({"src_vocab_size": 4, "tgt_vocab_size": 4, "layers": 2})


def test_word_dropout_drops_tokens_in_training_only_and_round_trips():
    config = TransformerConfig(src_vocab_size=50, tgt_vocab_size=50, word_dropout=0.3, dropout=0.0, **SMALL)
    model = TransformerModel(config)
    names = [layer.name for layer in model.layers]
    assert "encoder_word_dropout" in names and "decoder_word_dropout" in names
    assert "encoder_word_dropout" not in [layer.name for layer in build_transformer(50, 50, **SMALL).layers]
    plain = build_transformer(50, 50, dropout=0.0, **SMALL)
    plain.set_weights(model.get_weights())
    batch = _batch(50, 50)
    # At inference the model is the same function as without word dropout; in training it is not.
    np.testing.assert_allclose(_np(model(batch, training=False)), _np(plain(batch)), rtol=1e-5, atol=1e-5)
    assert not np.allclose(_np(model(batch, training=True)), _np(plain(batch)), atol=1e-3)
    restored = type(model).from_config(model.get_config())
    assert restored.get_config()["word_dropout"] == 0.3
    assert TransformerConfig.from_json(config.to_json()) == config


def test_tied_output_bias_is_added_to_the_logits_and_not_trained():
    model = build_transformer(50, 50, **SMALL, share_embeddings=True, tie_output=True, output_bias=True)
    plain = build_transformer(50, 50, **SMALL, share_embeddings=True, tie_output=True)
    bias = np.linspace(-2, 2, 50).astype("float32")
    model.logits_bias.bias.assign(bias)
    assert model.logits_bias.trainable_weights == [] and len(model.trainable_weights) == len(plain.trainable_weights)
    for source, target in zip(plain.trainable_weights, model.trainable_weights):
        target.assign(source)
    batch = _batch(50, 50)
    np.testing.assert_allclose(_np(model(batch)), _np(plain(batch)) + bias, rtol=1e-5, atol=1e-5)
    assert build_transformer(50, 50, **SMALL).logits_bias is None


def test_unscaled_embeddings_skip_the_square_root():
    model = build_transformer(50, 50, **SMALL, scale_embeddings=False)
    assert not model.encoder_embedding.scale and not model.decoder_embedding.scale
    assert build_transformer(50, 50, **SMALL).encoder_embedding.scale


@pytest.mark.parametrize("options", [
    {}, {"norm_first": True, "share_embeddings": True, "tie_output": True},
    {"share_embeddings": True, "tie_output": True, "output_bias": True, "activation": "swish",
     "position": "sinusoidal_concat"}, M2M_100], ids=["paper", "pre-norm-tied", "marian", "m2m_100"])
def test_parts_decode_step_matches_full_forward(options):
    model = build_transformer(50, 50, **SMALL, **options)
    if model.logits_bias is not None:
        model.logits_bias.bias.assign(np.linspace(-1, 1, 50).astype("float32"))
    batch = _batch(50, 50)
    enc = batch["encoder_inputs"]
    dec = np.tile(batch["decoder_inputs"][:1, :4], (3, 1))
    full = _np(model({"encoder_inputs": enc, "decoder_inputs": dec}))
    parts = TransformerParts.from_model(model)
    hoisted = parts.with_loop_invariants()  # what the decoders step with
    if options.get("tie_output"):  # the embedding matrix, transposed once
        assert hoisted is not parts and tuple(hoisted.output_projection.transposed.shape) == (32, 50)
        assert parts.output_projection.transposed is None  # the original parts are left as they were
    else:
        assert hoisted is parts
    for stepping in (parts, hoisted):
        encoded, mask = stepping.encode(enc)
        cross = stepping.cross_attention_caches(encoded)
        caches = stepping.empty_self_attention_caches(3, 8)
        for i in range(4):
            logits, caches = stepping.decode_step(dec[:, i:i + 1], i, caches, cross, mask)
            np.testing.assert_allclose(_np(logits)[:, 0], full[:, i], rtol=1e-4, atol=1e-4)


def test_tiny_model_learns_sequence_reversal():
    """A 1+1-layer model learns to reverse digit strings to > 95% token accuracy in seconds."""
    rng = np.random.default_rng(0)
    n, length, vocab = 3000, 6, 12  # ids 3..11 are digits, 1 = start, 2 = end
    src = rng.integers(3, vocab, (n, length)).astype("int32")
    tgt = src[:, ::-1]
    dec_in = np.concatenate([np.ones((n, 1), "int32"), tgt], axis=1)
    labels = np.concatenate([tgt, np.full((n, 1), 2, "int32")], axis=1)
    model = build_transformer(vocab, vocab, num_layers=1, d_model=64, num_heads=4, d_ff=128, dropout=0.0)
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["sparse_categorical_accuracy"],
    )
    model.fit({"encoder_inputs": src, "decoder_inputs": dec_in}, labels, batch_size=64, epochs=6, verbose=0)
    test_src = rng.integers(3, vocab, (200, length)).astype("int32")
    test_tgt = test_src[:, ::-1]
    test_in = np.concatenate([np.ones((200, 1), "int32"), test_tgt], axis=1)
    pred = _np(model({"encoder_inputs": test_src, "decoder_inputs": test_in})).argmax(-1)[:, :length]
    accuracy = (pred == test_tgt).mean()
    assert accuracy > 0.95, accuracy


def test_parts_come_from_the_model_attributes():
    from keras_transformer.models import TransformerParts

    model = build_transformer(50, 60, **SMALL, dropout=0.0)
    parts = TransformerParts.from_model(model)
    assert parts.encoder_layers == model.encoder_layers and parts.decoder_embedding is model.decoder_embedding
    plain = keras.Model(model.input, model.output)  # a plain Functional model holding the same layers
    with pytest.raises(ValueError, match="not a keras_transformer seq2seq model"):
        TransformerParts.from_model(plain)


def test_the_start_logit_is_the_padding_logit_and_the_rest_are_untouched():
    model = build_transformer(50, 50, **SMALL, **M2M_100)
    plain = build_transformer(50, 50, **SMALL, **{**M2M_100, "start_logit_from_padding": None})
    plain.set_weights(model.get_weights())
    batch = _batch(50, 50)
    logits, reference = (ops.convert_to_numpy(m(batch)) for m in (model, plain))
    np.testing.assert_array_equal(logits[..., 2], reference[..., 0])
    np.testing.assert_array_equal(np.delete(logits, 2, axis=-1), np.delete(reference, 2, axis=-1))
    assert not np.allclose(reference[..., 2], reference[..., 0])  # the replacement changed something


def test_start_logit_from_padding_needs_a_tied_biased_output():
    with pytest.raises(ValueError, match="start_logit_from_padding = 2: needs tie_output"):
        build_transformer(50, 50, **SMALL, start_logit_from_padding=2)
