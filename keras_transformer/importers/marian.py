"""Marian (OPUS-MT) checkpoints in the Hugging Face layout -> a run directory.

A Marian model is the paper's encoder-decoder with post-norm blocks, sinusoidal positions laid out as all sines
then all cosines (`position="sinusoidal_concat"`), token embeddings scaled by sqrt(d_model), LayerNorm epsilon 1e-5,
usually one embedding table shared by the encoder, the decoder and the tied output projection, plus a fixed bias on
the logits (`final_logits_bias`). `marian_model_config` maps `config.json` onto `TransformerConfig`,
`assign_marian_weights` copies the tensors name by name (torch `Linear` weights are `[out, in]`: a Keras kernel is
their transpose), and the tokenizers are `SentencePieceTokenizer`s over `source.spm` / `target.spm` and `vocab.json`.

Token ids: Marian has `</s>` = 0 and uses `<pad>` (the last id) both as padding and as the decoder's first token;
this package's models mask id 0 as padding and start decoding from a start token. The import keeps our
convention and permutes the vocabulary instead: our ids are `<pad>`, `<unk>`, `[START]`, `</s>`, then Marian's
other tokens in Marian's order (one more row than Marian has), and every embedding row, output row and logit bias
is taken from the Marian row of the same token (`[START]` gets Marian's `<pad>` row, which is what Marian's
decoder embeds at its first step). Logits therefore agree token for token; `SentencePieceTokenizer.original_ids`
maps ours to Marian's.
"""

import os

import numpy as np

from keras_transformer.data.sentencepiece_tokenizer import SentencePieceTokenizer
from keras_transformer.importers.bart_layout import IMPORT_FILE
from keras_transformer.importers.bart_layout import CheckpointTensors
from keras_transformer.importers.bart_layout import assign_blocks
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

MODEL_TYPE = "marian"
# What an import downloads from the Hub (the rest of a repository, e.g. TensorFlow or Flax weights, is left there).
HUB_FILES = ("config.json", "generation_config.json", "model.safetensors", "model.safetensors.index.json",
             "model-*.safetensors", "pytorch_model.bin", "source.spm", "target.spm", "vocab.json",
             "target_vocab.json", "tokenizer_config.json")
_ACTIVATIONS = {"swish": "swish", "silu": "swish", "relu": "relu", "gelu": "gelu"}


def read_marian_config(directory):
    """The checkpoint's `config.json`, checked to be a Marian model this package can rebuild.

    Raises:
        CheckpointError: naming `config.json` and what it holds instead.
    """
    path = os.path.join(directory, "config.json")
    config = read_json_object(path, "the model's config.json")
    model_type = config.get("model_type")
    if model_type != MODEL_TYPE:
        architectures = ", ".join(config.get("architectures") or []) or "none listed"
        raise CheckpointError(f"{path}: model_type {model_type!r} (architectures: {architectures}) is not a Marian "
                              "(OPUS-MT) checkpoint; keras-transformer import reads model_type 'marian'")
    for key in ("d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads", "vocab_size"):
        if not isinstance(config.get(key), int) or config[key] < 1:
            raise CheckpointError(f"{path}: expected a positive integer \"{key}\", found {config.get(key)!r}")
    pairs = (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim"))
    for first, second in pairs:
        if config.get(second, config.get(first)) != config.get(first):
            raise CheckpointError(f"{path}: {first} = {config.get(first)} and {second} = {config.get(second)} "
                                  "differ; this package's blocks take one value for both sides")
    activation = config.get("activation_function", "gelu")
    if activation not in _ACTIVATIONS:
        raise CheckpointError(f"{path}: activation_function {activation!r} is not supported; expected one of "
                              f"{', '.join(_ACTIVATIONS)}")
    if config.get("normalize_before") or config.get("normalize_embedding"):
        raise CheckpointError(f"{path}: pre-norm or embedding-norm Marian variants are not supported")
    if config["d_model"] % config["encoder_attention_heads"]:
        raise CheckpointError(f"{path}: d_model = {config['d_model']} is not divisible by encoder_attention_heads = "
                              f"{config['encoder_attention_heads']}")
    return config


def marian_model_config(config, source_vocab_size, target_vocab_size):
    """The `TransformerConfig` of a Marian `config.json` (a dict), for our (permuted) vocabulary sizes."""
    shared = bool(config.get("share_encoder_decoder_embeddings", True))
    tied = bool(config.get("tie_word_embeddings", True))
    return TransformerConfig(
        src_vocab_size=source_vocab_size,
        tgt_vocab_size=target_vocab_size,
        **bart_sizes(config, max_positions=512),
        activation=_ACTIVATIONS[config.get("activation_function", "gelu")],
        norm_first=False,
        position="sinusoidal_concat",
        use_bias=True,
        share_embeddings=shared,
        tie_output=tied,
        scale_embeddings=bool(config.get("scale_embedding", True)),
        output_bias=tied,  # an untied projection is a Dense layer, whose bias takes final_logits_bias
    )


def read_marian_tokenizers(directory, config):
    """`(source, target)` `SentencePieceTokenizer`s of a checkpoint directory (`source.spm`, `target.spm`,
    `vocab.json`, and `target_vocab.json` where the checkpoint has separate vocabularies).

    Raises:
        CheckpointError: a missing or unreadable file, named.
    """
    shared = bool(config.get("share_encoder_decoder_embeddings", True))
    settings = read_json_object(os.path.join(directory, "tokenizer_config.json"), "") if os.path.isfile(
        os.path.join(directory, "tokenizer_config.json")) else {}
    separate = bool(settings.get("separate_vocabs", False)) or not shared
    tokens = {name: _token(settings.get(name), default)
              for name, default in (("pad_token", "<pad>"), ("unk_token", "<unk>"), ("eos_token", "</s>"))}
    source_vocab = os.path.join(directory, "vocab.json")
    target_vocab = os.path.join(directory, "target_vocab.json") if separate else source_vocab
    for path in (os.path.join(directory, "source.spm"), os.path.join(directory, "target.spm"), source_vocab,
                 target_vocab):
        if not os.path.isfile(path):
            raise CheckpointError(f"{path}: missing; a Marian checkpoint's tokenizer needs source.spm, target.spm and "
                                  "vocab.json" + (" and target_vocab.json (separate vocabularies)" if separate else ""))
    try:
        source = SentencePieceTokenizer.from_marian(os.path.join(directory, "source.spm"), source_vocab, **tokens)
        target = SentencePieceTokenizer.from_marian(os.path.join(directory, "target.spm"), target_vocab, **tokens)
    except (ValueError, OSError) as error:
        raise CheckpointError(str(error).splitlines()[0]) from None
    return source, target


def _token(value, default):
    if isinstance(value, dict):  # transformers writes AddedToken objects as dicts with their "content"
        value = value.get("content")
    return value if isinstance(value, str) and value else default


def assign_marian_weights(model, tensors, config, source_tokenizer, target_tokenizer, where="the checkpoint"):
    """Copies a Marian checkpoint's tensors (a dict name -> array) into `model` (built from `marian_model_config`).

    Raises:
        CheckpointError: a tensor missing or of another shape than `config` implies, or layers the config does not
            know of; the message names `where` (the weights file).
    """
    t = CheckpointTensors(tensors, where)
    d, d_ff = config["d_model"], config.get("encoder_ffn_dim", 4 * config["d_model"])
    shared = bool(config.get("share_encoder_decoder_embeddings", True))
    tied = bool(config.get("tie_word_embeddings", True))
    source_rows = int(config["vocab_size"])
    target_rows = source_rows if shared else int(config.get("decoder_vocab_size") or source_rows)
    for tokenizer, rows, side in ((source_tokenizer, source_rows, "source"), (target_tokenizer, target_rows, "target")):
        if tokenizer.original_vocab_size != rows:
            raise CheckpointError(f"{where}: config.json has {rows} {side} tokens but the {side} vocabulary file has "
                                  f"{tokenizer.original_vocab_size}")
    if shared:
        table = t.get("shared.weight", (source_rows, d), "encoder.embed_tokens.weight", "decoder.embed_tokens.weight")
        encoder_table = decoder_table = table
    else:
        encoder_table = t.get("encoder.embed_tokens.weight", (source_rows, d))
        decoder_table = t.get("decoder.embed_tokens.weight", (target_rows, d))
    assign_rows(model.encoder_embedding.embeddings, encoder_table, source_tokenizer.original_ids)
    if model.decoder_embedding is not model.encoder_embedding:
        assign_rows(model.decoder_embedding.embeddings, decoder_table, target_tokenizer.original_ids)
    bias = t.get("final_logits_bias", (1, target_rows)) if t.has("final_logits_bias") else np.zeros((1, target_rows))
    bias = bias[0][target_tokenizer.original_ids]
    if tied:
        model.logits_bias.bias.assign(bias)
    else:
        head = t.get("lm_head.weight", (target_rows, d))
        model.output_projection.kernel.assign(head[target_tokenizer.original_ids].T)
        model.output_projection.bias.assign(bias)

    assign_blocks(model, t, d, d_ff)
    t.warn_unused()
    return model


def import_marian(source, output_dir, overwrite=False, verbose=1):
    """Imports a Marian (OPUS-MT) checkpoint as a run directory that `translate`, `evaluate`, `tune`, `export`,
    `ensemble` and `train --init-from` take like one that `train` wrote.

    Args:
        source: a directory in the Hugging Face layout (`config.json`, `model.safetensors` or `pytorch_model.bin`,
            `source.spm`, `target.spm`, `vocab.json`) or `hf://OWNER/NAME` (downloaded with `huggingface_hub`).
        output_dir: the run directory to write. It is written whole or not at all (a temporary directory renamed
            into place); an existing run there is replaced only with `overwrite`.
        overwrite: replace a run directory at `output_dir`.
        verbose: 0 quiet, 1 a line per step.

    Returns:
        `output_dir`.

    Raises:
        CheckpointError: what cannot be imported (another architecture, a missing or damaged file, a shape that
            does not fit the config, an unreachable hub), in one line naming the file.

    Example (`checkpoint_dir` holds a Marian checkpoint in the Hugging Face layout; `hf://Helsinki-NLP/opus-mt-de-en`
    downloads one):

    >>> import_marian(checkpoint_dir, "runs/opus-mt-de-en", verbose=0)
    'runs/opus-mt-de-en'
    >>> from keras_transformer import load_run
    >>> load_run("runs/opus-mt-de-en").model_config.position
    'sinusoidal_concat'
    """
    output_dir = os.fspath(output_dir)
    check_destination(output_dir, overwrite)
    say = print if verbose else (lambda *args, **kwargs: None)
    directory = resolve_source(source, HUB_FILES, verbose=verbose)
    config = read_marian_config(directory)
    source_tokenizer, target_tokenizer = read_marian_tokenizers(directory, config)
    tensors = read_tensors(directory)
    weights_file = next((name for name in ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
                         if os.path.isfile(os.path.join(directory, name))), "the weights")
    model_config = marian_model_config(config, source_tokenizer.vocab_size, target_tokenizer.vocab_size)
    say(f"Importing {source}: Marian, {config['encoder_layers']}+{config['decoder_layers']} layers, d_model "
        f"{config['d_model']}, {config['encoder_attention_heads']} heads, vocabulary {source_tokenizer.vocab_size:,}"
        f"{'' if model_config.share_embeddings else ' / ' + format(target_tokenizer.vocab_size, ',')}")
    model = TransformerModel(model_config)
    assign_marian_weights(model, tensors, config, source_tokenizer, target_tokenizer,
                          where=os.path.join(directory, weights_file))
    del tensors
    shared = model_config.share_embeddings and source_tokenizer.vocab == target_tokenizer.vocab
    training = TrainingConfig(vocab_size=source_tokenizer.vocab_size, shared_vocab=shared)
    write_imported_run(output_dir, model, (source_tokenizer, target_tokenizer), (model_config, training),
                       {"source": os.fspath(source), "revision": hub_revision(directory),
                        "format": "marian", "config": config},
                       generation_decoding(directory, config, source))
    say(f"Wrote {output_dir} (model.keras, tokenizers/, config.json; {model.count_params():,} weights)")
    return output_dir


__all__ = ["CheckpointError", "HUB_FILES", "IMPORT_FILE", "assign_marian_weights", "import_marian",
           "marian_model_config", "read_marian_config", "read_marian_tokenizers"]
