"""A run as a CTranslate2 model directory.

`export_ctranslate2(run, out)` maps the model's weights onto CTranslate2's `TransformerSpec` (post-norm or pre-norm,
our sinusoidal or learned position table, scaled embeddings, tied or separate output projection) and writes
`model.bin` and the vocabularies with CTranslate2's own converter API, plus `tokenizers/` so that text is tokenized and
detokenized exactly as our translator does. `keras_transformer.translators.CTranslate2Translator(out)` translates with
it (what `keras-transformer translate OUT` uses).

CTranslate2 is an optional extra (`pip install "keras-transformer-mt[ctranslate2]"`); this module imports it only
when called.
Rotary position embeddings and activations other than ReLU/GELU/SiLU are not supported (a clear error says so).
"""

import json
import os

import numpy as np

from keras_transformer.atomic import atomic_path
from keras_transformer.export.destination import CTRANSLATE2_MARKER
from keras_transformer.export.destination import check_destination
from keras_transformer.extras import require
from keras_transformer.layers.positional_embedding import sinusoidal_encoding
from keras_transformer.models import TransformerParts
from keras_transformer.models.transformer_parts import TiedOutputProjection

MARKER_FILE = CTRANSLATE2_MARKER


def ctranslate2_module():
    return require("ctranslate2", "ctranslate2", "CTranslate2 (export --ctranslate2, or a CTranslate2 directory)")


def _numpy(variable):
    import keras

    return np.asarray(keras.ops.convert_to_numpy(variable), dtype=np.float32)


def _position_table(embedding):
    """The `[max_length, d_model]` position encodings an embedding adds (sinusoidal or learned)."""
    if embedding.position == "learned":
        return _numpy(embedding.position_embeddings)
    return _numpy(sinusoidal_encoding(np.arange(embedding.max_length), embedding.d_model,
                                      concat=embedding.position == "sinusoidal_concat",
                                      fairseq=embedding.position == "sinusoidal_fairseq"))


def _linear(spec, layer):
    kernel = _numpy(layer.kernel)
    spec.weight = kernel.reshape(kernel.shape[0], -1).T.copy()
    spec.bias = _numpy(layer.bias).reshape(-1) if getattr(layer, "bias", None) is not None else np.zeros(
        spec.weight.shape[0], np.float32)


def _norm(spec, layer):
    spec.gamma = _numpy(layer.gamma)
    spec.beta = _numpy(layer.beta)


def _attention(spec, attention, norm, cross):
    from ctranslate2.converters import utils
    from ctranslate2.specs import common_spec

    _norm(spec.layer_norm, norm)
    q, k, v, o = (common_spec.LinearSpec() for _ in range(4))
    _linear(q, attention.query_dense)
    _linear(k, attention.key_dense)
    _linear(v, attention.value_dense)
    _linear(o, attention.output_dense)
    if cross:
        spec.linear[0] = q
        utils.fuse_linear(spec.linear[1], [k, v])
    else:
        utils.fuse_linear(spec.linear[0], [q, k, v])
    spec.linear[-1] = o


def _ffn(spec, block):
    _norm(spec.layer_norm, block.ffn_norm)
    _linear(spec.linear_0, block.ffn_inner)
    _linear(spec.linear_1, block.ffn_outer)


def model_spec(run):
    """CTranslate2's `TransformerSpec` holding a run's weights and vocabularies."""
    ctranslate2_module()
    from ctranslate2.specs import common_spec
    from ctranslate2.specs import transformer_spec

    config = run.model_config
    # A decoder that starts from `</s>` (M2M-100, NLLB-200): `[START]` has the `</s>` row, and its logit, which our
    # model replaces by the padding logit, is suppressed in CTranslate2 as the padding's is.
    if config.use_rotary or config.position == "none":
        raise ValueError("CTranslate2 export: rotary position embeddings are not supported; train with "
                         "position='sinusoidal' or 'learned'")
    activations = {"relu": common_spec.Activation.RELU, "gelu": common_spec.Activation.GELU,
                   "silu": common_spec.Activation.SWISH, "swish": common_spec.Activation.SWISH}
    if config.activation not in activations:
        raise ValueError(f"CTranslate2 export: activation {config.activation!r} is not supported; expected one of "
                         f"{', '.join(activations)}")
    parts = TransformerParts.from_model(run.model)
    spec = transformer_spec.TransformerSpec.from_config(
        (len(parts.encoder_layers), len(parts.decoder_layers)), config.num_heads, pre_norm=config.norm_first,
        activation=activations[config.activation])
    spec.config.layer_norm_epsilon = config.layer_norm_epsilon
    target = run.target_tokenizer
    for name, token_id in (("unk_token", target.unk_id), ("bos_token", target.start_id), ("eos_token", target.end_id),
                           ("decoder_start_token", target.start_id)):
        setattr(spec.config, name, target.vocab[token_id])
    for side, embedding, layers, final_norm in (
            ("encoder", parts.encoder_embedding, parts.encoder_layers, parts.encoder_final_norm),
            ("decoder", parts.decoder_embedding, parts.decoder_layers, parts.decoder_final_norm)):
        side_spec = getattr(spec, side)
        embeddings = side_spec.embeddings[0] if isinstance(side_spec.embeddings, list) else side_spec.embeddings
        embeddings.weight = _numpy(embedding.embeddings)
        side_spec.scale_embeddings = bool(embedding.scale)
        side_spec.position_encodings.encodings = _position_table(embedding)
        if final_norm is not None:
            _norm(side_spec.layer_norm, final_norm)
        for block, layer_spec in zip(layers, side_spec.layer):
            _attention(layer_spec.self_attention, block.self_attention, block.self_attention_norm, cross=False)
            if side == "decoder":
                _attention(layer_spec.attention, block.cross_attention, block.cross_attention_norm, cross=True)
            _ffn(layer_spec.ffn, block)
    if isinstance(parts.output_projection, TiedOutputProjection):
        spec.decoder.projection.weight = _numpy(parts.decoder_embedding.embeddings)
        bias = parts.output_projection.bias
        spec.decoder.projection.bias = (np.zeros(parts.vocab_size, np.float32) if bias is None
                                        else _numpy(bias.bias).reshape(-1))
    else:
        _linear(spec.decoder.projection, parts.output_projection)
    spec.register_source_vocabulary(list(run.source_tokenizer.vocab))
    spec.register_target_vocabulary(list(run.target_tokenizer.vocab))
    return spec


def export_ctranslate2(run, path, quantization=None, overwrite=False, verbose=0):
    """Writes a CTranslate2 model directory for a `Run` (or run directory): `model.bin`, vocabularies, tokenizers.

    Args:
        run: a `Run` or a run directory.
        path: the directory to write (atomically).
        quantization: CTranslate2 weight type (`None` float32, `"int8"`, `"int8_float32"`, `"float16"`, ...).
        overwrite: replace an existing directory.
        verbose: 0 quiet, 1 print what was written.

    Returns:
        The path.
    """
    ctranslate2 = ctranslate2_module()
    if isinstance(run, (str, os.PathLike)):
        from keras_transformer.runs.run import load_run

        run = load_run(run)
    check_destination(path, "CTranslate2 model", overwrite)
    spec = model_spec(run)

    class _Converter(ctranslate2.converters.Converter):
        def _load(self):
            return spec

    with atomic_path(path) as temporary:
        _Converter().convert(temporary, quantization=quantization, force=True)
        run.source_tokenizer.save(os.path.join(temporary, "tokenizers", "source"))
        if run.target_tokenizer is not run.source_tokenizer:
            run.target_tokenizer.save(os.path.join(temporary, "tokenizers", "target"))
        with open(os.path.join(temporary, MARKER_FILE), "w", encoding="utf-8") as f:
            decoding = run.decoding
            json.dump({"max_length": int(decoding.max_length if decoding is not None and decoding.max_length
                                         else run.model_config.max_length),
                       "force_end": bool(decoding is not None and decoding.force_end),
                       "beam_size": int(decoding.beam_size if decoding is not None else 1)}, f)
    if verbose:
        print(f"Wrote the CTranslate2 model {path} ({os.path.getsize(os.path.join(path, 'model.bin')) / 2**20:.1f} "
              f"MiB model.bin{', ' + quantization if quantization else ''})")
    return path


def is_ctranslate2_model(path):
    return os.path.exists(os.path.join(path, MARKER_FILE))
