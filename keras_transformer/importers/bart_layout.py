"""What Marian and M2M-100 (NLLB) checkpoints share: transformers' BART-family tensor names, the block-by-block weight
copy, and writing the imported run directory.

Both families name their tensors `[model.]{encoder,decoder}.layers.N.{self_attn,encoder_attn}.{q,k,v,out}_proj`,
`self_attn_layer_norm`, `encoder_attn_layer_norm`, `fc1`, `fc2` and `final_layer_norm`; torch `Linear` weights are
`[out, in]`, so a Keras kernel is their transpose. The block norms map by name whatever the block order: in a
pre-norm block (M2M-100) `self_attn_layer_norm` is the norm before self-attention, which our pre-norm block also
calls `self_attention_norm`.
"""

import json
import os
import re
import warnings

from keras_transformer.atomic import atomic_path
from keras_transformer.decoding.tuning import MAX_BEAMS
from keras_transformer.decoding.tuning import DecodingSettings
from keras_transformer.importers.checkpoint import CheckpointError
from keras_transformer.importers.checkpoint import CheckpointWarning
from keras_transformer.importers.checkpoint import read_json_object
from keras_transformer.runs.directory import is_run_directory
from keras_transformer.runs.run import save_model
from keras_transformer.runs.run import save_tokenizers
from keras_transformer.runs.run import write_decoding_settings
from keras_transformer.runs.run import write_run_config

IMPORT_FILE = "imported.json"  # in the run directory: where the weights came from


# Tensors a checkpoint in the Hugging Face layout may hold that no weight is read from: tied copies of the embedding
# table and output projection, and sinusoidal position tables (buffers, computed by the model itself).
KNOWN_EXTRAS = re.compile(r"^((encoder|decoder)\.embed_tokens\.weight|lm_head\.weight|final_logits_bias|"
                          r"(encoder|decoder)\.embed_positions\.(weight|_float_tensor))$")


class CheckpointTensors:
    """The checkpoint's tensors (a mapping, read on demand), taken by name with the shape the config implies
    (errors name the file). Names lose the `model.` prefix of `...ForConditionalGeneration` checkpoints (base models
    have none)."""

    def __init__(self, tensors, where):
        self._source = tensors
        self.tensors = {name[len("model."):] if name.startswith("model.") else name: name for name in tensors}
        self.where = where
        self.used = set()

    def get(self, name, shape, *alternatives):
        for candidate in (name, *alternatives):
            if candidate in self.tensors:
                value = self._source[self.tensors[candidate]]
                if tuple(value.shape) != tuple(shape):
                    raise CheckpointError(f"{self.where}: tensor {candidate!r} has shape {tuple(value.shape)}; "
                                          f"expected {tuple(shape)} (from config.json)")
                self.used.add(candidate)
                return value
        raise CheckpointError(f"{self.where}: tensor {name!r} is missing (expected shape {tuple(shape)})")

    def has(self, name):
        return name in self.tensors

    def warn_unused(self):
        """A `CheckpointWarning` listing the tensors no weight was read from, past the format's known extras (tied
        copies of the embedding table, sinusoidal position buffers): a checkpoint of another architecture than its
        config says would lose them unnoticed."""
        unused = sorted(name for name in self.tensors if name not in self.used and not KNOWN_EXTRAS.match(name))
        if unused:
            shown = ", ".join(unused[:8]) + (f" and {len(unused) - 8} more" if len(unused) > 8 else "")
            warnings.warn(f"{self.where}: {len(unused)} tensors are not part of the model and were not imported: "
                          f"{shown}", CheckpointWarning, stacklevel=3)


def bart_sizes(config, max_positions):
    """The `TransformerConfig` fields every BART-layout `config.json` (Marian, M2M-100, NLLB) gives the same way:
    layers, widths, heads, dropout rates, the longest sequence (`max_positions` when it names none), and
    `torch.nn.LayerNorm`'s default epsilon, which their blocks use."""
    return dict(
        num_layers=config["encoder_layers"],
        num_encoder_layers=config["encoder_layers"],
        num_decoder_layers=config["decoder_layers"],
        d_model=config["d_model"],
        num_heads=config["encoder_attention_heads"],
        d_ff=config.get("encoder_ffn_dim", 4 * config["d_model"]),
        dropout=float(config.get("dropout", 0.1)),
        attention_dropout=float(config.get("attention_dropout", 0.0)),
        activation_dropout=float(config.get("activation_dropout", 0.0)),
        max_length=int(config.get("max_position_embeddings", max_positions)),
        layer_norm_epsilon=1e-5,
    )


def assign_blocks(model, t, d, d_ff):
    """Copies every encoder and decoder block's attention, norm and feed-forward tensors from `t` (a
    `CheckpointTensors`) into `model`; a checkpoint with more layers than the model is refused."""

    def linear(layer, prefix, n_in, n_out):
        layer.kernel.assign(t.get(f"{prefix}.weight", (n_out, n_in)).T)
        layer.bias.assign(t.get(f"{prefix}.bias", (n_out,)))

    def attention(layer, prefix):
        for ours, theirs in (("query_dense", "q_proj"), ("key_dense", "k_proj"), ("value_dense", "v_proj"),
                             ("output_dense", "out_proj")):
            linear(getattr(layer, ours), f"{prefix}.{theirs}", d, d)

    for side, blocks in (("encoder", model.encoder_layers), ("decoder", model.decoder_layers)):
        extra = f"{side}.layers.{len(blocks)}."
        if any(name.startswith(extra) for name in t.tensors):
            raise CheckpointError(f"{t.where}: holds more {side} layers than config.json's {side}_layers = "
                                  f"{len(blocks)}")
        for i, block in enumerate(blocks):
            prefix = f"{side}.layers.{i}"
            attention(block.self_attention, f"{prefix}.self_attn")
            assign_norm(t, block.self_attention_norm, f"{prefix}.self_attn_layer_norm", d)
            if side == "decoder":
                attention(block.cross_attention, f"{prefix}.encoder_attn")
                assign_norm(t, block.cross_attention_norm, f"{prefix}.encoder_attn_layer_norm", d)
            linear(block.ffn_inner, f"{prefix}.fc1", d, d_ff)
            linear(block.ffn_outer, f"{prefix}.fc2", d_ff, d)
            assign_norm(t, block.ffn_norm, f"{prefix}.final_layer_norm", d)


def assign_rows(variable, table, order, block=16384):
    """`variable[i] = table[order[i]]` for every row, `block` rows at a time where the backend writes a slice of a
    variable in place (TensorFlow, PyTorch), so no reordered copy of a whole 256k-row table is made; JAX's arrays
    are immutable, and there it is one assignment."""
    import contextlib

    import keras

    backend = keras.backend.backend()
    if backend not in ("tensorflow", "torch") or len(order) <= block:
        variable.assign(table[order])
        return
    if backend == "torch":
        import torch

        scope, write = torch.no_grad(), lambda rows, values: rows.copy_(torch.from_numpy(values))
    else:
        scope, write = contextlib.nullcontext(), lambda rows, values: rows.assign(values)
    with scope:
        for start in range(0, len(order), block):
            write(variable.value[start:start + block], table[order[start:start + block]])


def assign_norm(t, layer, prefix, d):
    layer.gamma.assign(t.get(f"{prefix}.weight", (d,)))
    layer.beta.assign(t.get(f"{prefix}.bias", (d,)))


def check_destination(output_dir, overwrite):
    """Refuses an `--output` that is a file, a non-empty directory that is not a run, or a run without
    `overwrite` (before any work)."""
    if os.path.lexists(output_dir) and not os.path.isdir(output_dir):
        raise CheckpointError(f"{output_dir}: exists and is not a directory; --output must name a new run directory")
    if os.path.isdir(output_dir) and os.listdir(output_dir):
        if not is_run_directory(output_dir):
            raise CheckpointError(f"{output_dir}: not empty and not a keras-transformer run directory; choose a new "
                                  "--output (nothing there is written over)")
        if not overwrite:
            raise CheckpointError(f"{output_dir}: holds a run; pass --overwrite to replace it, or choose another "
                                  "--output")


def write_imported_run(output_dir, model, tokenizers, configs, record, decoding):
    """Writes the run directory whole or not at all (a temporary directory renamed into place).

    Args:
        output_dir: the run directory.
        model: the model with the checkpoint's weights.
        tokenizers: `(source, target)`.
        configs: `(TransformerConfig, TrainingConfig)`.
        record: what `imported.json` holds (source, format, the checkpoint's config).
        decoding: the `DecodingSettings` that `decoding.json` holds.
    """
    import keras

    with atomic_path(output_dir) as temporary:
        os.makedirs(temporary)
        save_tokenizers(temporary, *tokenizers)
        write_run_config(temporary, *configs)
        with open(os.path.join(temporary, IMPORT_FILE), "w", encoding="utf-8") as f:
            json.dump({**record, "keras_version": keras.__version__}, f, indent=1)
            f.write("\n")
        write_decoding_settings(temporary, decoding)
        save_model(model, temporary)


def generation_decoding(directory, config, source):
    """The checkpoint's generation settings as a `DecodingSettings` (what `decoding.json` holds), so that
    `translate` decodes as `transformers`' `generate()` does by default: its beam size and length penalty with
    transformers' rule, its `max_length` (which counts the decoder's start token: one generated token fewer here),
    and `forced_eos_token_id` (the last allowed token is the end token). `generation_config.json` where the
    checkpoint has one, else `config.json`, else transformers' defaults (greedy, `max_length` 20). A setting past
    what the model holds (`max_length` beyond its positions) or what decoding should spend (`num_beams` over
    `MAX_BEAMS`) is a `CheckpointError` naming the file."""
    path = os.path.join(directory, "generation_config.json")
    generation = read_json_object(path, "the generation settings") if os.path.isfile(path) else {}

    def setting(name, default):
        value = generation.get(name, config.get(name))
        return default if value is None else value

    def whole(name, default, low, high):
        value = setting(name, default)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise CheckpointError(f"{path if name in generation else 'config.json'}: {name} {value!r}: expected an "
                                  f"integer from {low} to {high} ({why[name]})")
        return value

    positions = int(config.get("max_position_embeddings") or 1024)
    why = {"num_beams": f"beams wider than {MAX_BEAMS} cost more memory per sentence than any server allows",
           "max_new_tokens": f"the model has {positions} target positions",
           "max_length": f"the model has {positions} target positions, after the start token"}
    max_new = setting("max_new_tokens", None)
    max_length = (whole("max_new_tokens", None, 1, positions) if max_new is not None
                  else whole("max_length", 20, 2, positions + 1) - 1)
    eos = setting("eos_token_id", 0)  # Marian's </s> is 0; M2M-100's config names its own (2)
    forced = setting("forced_eos_token_id", None)
    return DecodingSettings(
        beam_size=whole("num_beams", 1, 1, MAX_BEAMS), length_penalty=float(setting("length_penalty", 1.0)),
        tuned_on=f"generation settings of {source}", length_penalty_rule="transformers",
        max_length=max(1, max_length), force_end=forced is not None and forced == eos)
