"""M2M-100 and NLLB-200 checkpoints in the Hugging Face layout (`model_type` `"m2m_100"`) -> a run directory.

An M2M-100 model (and NLLB-200, the same architecture) is a pre-norm encoder-decoder with a final LayerNorm after
each stack, fairseq's sinusoidal positions (`position="sinusoidal_fairseq"`: positions counted from 2, frequencies
over `d_model // 2 - 1`), ReLU, token embeddings scaled by sqrt(d_model), LayerNorm epsilon 1e-5, and one embedding
table shared by the encoder, the decoder and the output projection (no logit bias). `m2m_100_model_config` maps
`config.json` onto `TransformerConfig`, `assign_m2m_100_weights` copies the tensors, and the tokenizer is one
`MultilingualTokenizer` (SentencePiece BPE with fairseq's ids and the language codes) for both sides.

Token ids: fairseq has `<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3, and its decoder starts from `</s>`. Our ids are
`<pad>`, `<unk>`, `[START]`, `</s>`, then the checkpoint's other tokens in its order; `[START]` takes the `</s>`
row, which is what the checkpoint's decoder embeds at its first step. Because `[START]` and `</s>` then share a
row, the model replaces the logit at `[START]` by the padding logit (`start_logit_from_padding`): the logits at every
id but 0 are then exactly the checkpoint's, and a softmax over them is its softmax. The target language is the
first generated token, forced (transformers' `forced_bos_token_id`); the source is `[source language] X </s>`.

NLLB-MoE (`model_type` `"nllb-moe"`) is refused: its feed-forward blocks are mixtures of experts with a router,
which this package's blocks do not have.
"""

import os

import numpy as np

from keras_transformer.data.multilingual_tokenizer import MultilingualTokenizer
from keras_transformer.importers.bart_layout import CheckpointTensors
from keras_transformer.importers.bart_layout import assign_blocks
from keras_transformer.importers.bart_layout import assign_norm
from keras_transformer.importers.bart_layout import assign_rows
from keras_transformer.importers.bart_layout import bart_sizes
from keras_transformer.importers.bart_layout import check_destination
from keras_transformer.importers.bart_layout import generation_decoding
from keras_transformer.importers.bart_layout import write_imported_run
from keras_transformer.importers.checkpoint import CheckpointError
from keras_transformer.importers.checkpoint import hub_revision
from keras_transformer.importers.checkpoint import read_json_object
from keras_transformer.importers.checkpoint import read_tensors
from keras_transformer.importers.checkpoint import resolve_source
from keras_transformer.models import TransformerConfig
from keras_transformer.models import TransformerModel
from keras_transformer.runs.config import TrainingConfig

MODEL_TYPE = "m2m_100"
HUB_FILES = ("config.json", "generation_config.json", "model.safetensors", "model.safetensors.index.json",
             "model-*.safetensors", "pytorch_model.bin", "sentencepiece.bpe.model", "vocab.json", "tokenizer.json",
             "tokenizer_config.json", "special_tokens_map.json")
_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish", "silu": "swish"}
_START_ID = 2  # our [START]


def read_m2m_100_config(directory):
    """The checkpoint's `config.json`, checked to be an M2M-100 / NLLB model this package can rebuild.

    Raises:
        CheckpointError: naming `config.json` and what does not fit.
    """
    path = os.path.join(directory, "config.json")
    config = read_json_object(path, "the model's config.json")
    if config.get("model_type") != MODEL_TYPE:
        raise CheckpointError(f"{path}: model_type {config.get('model_type')!r} is not {MODEL_TYPE!r}")
    for key in ("d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads", "vocab_size"):
        if not isinstance(config.get(key), int) or config[key] < 1:
            raise CheckpointError(f"{path}: expected a positive integer \"{key}\", found {config.get(key)!r}")
    for first, second in (("encoder_attention_heads", "decoder_attention_heads"),
                          ("encoder_ffn_dim", "decoder_ffn_dim")):
        if config.get(second, config.get(first)) != config.get(first):
            raise CheckpointError(f"{path}: {first} = {config.get(first)} and {second} = {config.get(second)} "
                                  "differ; this package's blocks take one value for both sides")
    activation = config.get("activation_function", "relu")
    if activation not in _ACTIVATIONS:
        raise CheckpointError(f"{path}: activation_function {activation!r} is not supported; expected one of "
                              f"{', '.join(_ACTIVATIONS)}")
    if config["d_model"] % config["encoder_attention_heads"]:
        raise CheckpointError(f"{path}: d_model = {config['d_model']} is not divisible by encoder_attention_heads = "
                              f"{config['encoder_attention_heads']}")
    if not config.get("tie_word_embeddings", True):
        raise CheckpointError(f"{path}: tie_word_embeddings = false; M2M-100 and NLLB checkpoints tie the output "
                              "projection to the shared embedding, and only those are supported")
    if config.get("pad_token_id", 1) != 1 or config.get("decoder_start_token_id", 2) != 2:
        raise CheckpointError(f"{path}: pad_token_id = {config.get('pad_token_id')}, decoder_start_token_id = "
                              f"{config.get('decoder_start_token_id')}; expected fairseq's 1 and 2")
    return config


def m2m_100_model_config(config, vocab_size):
    """The `TransformerConfig` of an M2M-100 `config.json` (a dict), for our vocabulary size."""
    return TransformerConfig(
        src_vocab_size=vocab_size,
        tgt_vocab_size=vocab_size,
        **bart_sizes(config, max_positions=1024),
        activation=_ACTIVATIONS[config.get("activation_function", "relu")],
        norm_first=True,
        position="sinusoidal_fairseq",
        use_bias=True,
        share_embeddings=True,
        tie_output=True,
        scale_embeddings=bool(config.get("scale_embedding", True)),
        output_bias=True,
        start_logit_from_padding=_START_ID,
    )


def read_m2m_100_tokenizer(directory):
    """The `MultilingualTokenizer` of a checkpoint directory (see `MultilingualTokenizer.from_checkpoint`).

    Raises:
        CheckpointError: a missing or unreadable file, or a vocabulary without language codes, named.
    """
    try:
        return MultilingualTokenizer.from_checkpoint(directory)
    except (ValueError, OSError) as error:
        raise CheckpointError(str(error).splitlines()[0]) from None


def assign_m2m_100_weights(model, tensors, config, tokenizer, where="the checkpoint"):
    """Copies an M2M-100 checkpoint's tensors (a dict name -> array) into `model` (built from
    `m2m_100_model_config`).

    Raises:
        CheckpointError: a tensor missing or of another shape than `config` implies, a vocabulary larger than the
            embedding table, or layers the config does not know of; the message names `where`.
    """
    t = CheckpointTensors(tensors, where)
    d, d_ff, rows = config["d_model"], config.get("encoder_ffn_dim", 4 * config["d_model"]), config["vocab_size"]
    if tokenizer.original_vocab_size > rows:
        raise CheckpointError(f"{where}: config.json has vocab_size = {rows}, fewer rows than the tokenizer's "
                              f"{tokenizer.original_vocab_size} tokens")
    table = t.get("shared.weight", (rows, d), "encoder.embed_tokens.weight", "decoder.embed_tokens.weight")
    assign_rows(model.encoder_embedding.embeddings, table, tokenizer.original_ids)
    del table
    model.logits_bias.bias.assign(np.zeros((model.logits_bias.vocab_size,), np.float32))
    assign_blocks(model, t, d, d_ff)
    assign_norm(t, model.encoder_final_norm, "encoder.layer_norm", d)
    assign_norm(t, model.decoder_final_norm, "decoder.layer_norm", d)
    t.warn_unused()
    return model


def import_m2m_100(source, output_dir, overwrite=False, verbose=1):
    """Imports an M2M-100 or NLLB-200 checkpoint as a run directory that `translate`, `evaluate`, `export` and
    `train --init-from` take; translating needs a target language (`--target-lang`, `target_language=`).

    Args:
        source: a directory in the Hugging Face layout (`config.json`, `model.safetensors` or `pytorch_model.bin`,
            `sentencepiece.bpe.model`, and `tokenizer.json` (NLLB) or `vocab.json` (M2M-100)) or `hf://OWNER/NAME`.
        output_dir: the run directory to write, whole or not at all; an existing run is replaced only with
            `overwrite`.
        overwrite: replace a run directory at `output_dir`.
        verbose: 0 quiet, 1 a line per step.

    Returns:
        `output_dir`.

    Raises:
        CheckpointError: what cannot be imported, in one line naming the file.
    """
    output_dir = os.fspath(output_dir)
    check_destination(output_dir, overwrite)
    say = print if verbose else (lambda *args, **kwargs: None)
    directory = resolve_source(source, HUB_FILES, verbose=verbose)
    config = read_m2m_100_config(directory)
    tokenizer = read_m2m_100_tokenizer(directory)
    tensors = read_tensors(directory)
    weights_file = next((name for name in ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
                         if os.path.isfile(os.path.join(directory, name))), "the weights")
    model_config = m2m_100_model_config(config, tokenizer.vocab_size)
    say(f"Importing {source}: M2M-100 / NLLB, {config['encoder_layers']}+{config['decoder_layers']} layers, d_model "
        f"{config['d_model']}, {config['encoder_attention_heads']} heads, vocabulary {tokenizer.vocab_size:,}, "
        f"{len(tokenizer.languages)} languages")
    model = TransformerModel(model_config)
    assign_m2m_100_weights(model, tensors, config, tokenizer, where=os.path.join(directory, weights_file))
    del tensors
    training = TrainingConfig(vocab_size=tokenizer.vocab_size, shared_vocab=True)
    write_imported_run(output_dir, model, (tokenizer, tokenizer), (model_config, training),
                       {"source": os.fspath(source), "revision": hub_revision(directory),
                        "format": MODEL_TYPE, "config": config},
                       generation_decoding(directory, config, source))
    say(f"Wrote {output_dir} (model.keras, tokenizers/, config.json; {model.count_params():,} weights)")
    return output_dir


__all__ = ["HUB_FILES", "assign_m2m_100_weights", "import_m2m_100", "m2m_100_model_config", "read_m2m_100_config",
           "read_m2m_100_tokenizer"]
