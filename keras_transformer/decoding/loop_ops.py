"""What the decoding loops share: the banned-token bias, first-argmax, reading the weights once before a loop,
and trimming full-width outputs.

Every decoder in this package keeps static shapes: the outputs are first built at full width `[batch, max_length]`
and only trimmed to the longest decoded row when the values are concrete (eager execution). Inside a traced function
(`tf.function`, `jax.jit`, an exported SavedModel) the full width is returned, so shapes stay static.
"""

import keras
import numpy as np
from keras import ops

from keras_transformer.models.ensemble import EnsembleParts

# A logit that removes a token: exp(NEG - max) is exactly 0 in float32, and sums of a few
# thousand of them stay finite (decoders accumulate float32 log-probabilities only).
NEG = -1.0e9


def parts_layers(parts):
    """The distinct Keras layers of a `TransformerParts` or `EnsembleParts` (a shared embedding counts once)."""
    if isinstance(parts, EnsembleParts):
        unique = {id(layer): layer for member in parts.members for layer in parts_layers(member)}
        return list(unique.values())
    candidates = [
        parts.encoder_embedding,
        *parts.encoder_layers,
        parts.encoder_final_norm,
        parts.decoder_embedding,
        *parts.decoder_layers,
        parts.decoder_final_norm,
        parts.output_projection,
        # A tied projection is not a layer: its bias layer (Marian's, NLLB's zeros) is.
        getattr(parts.output_projection, "bias", None),
    ]
    unique = {}
    for layer in candidates:
        if isinstance(layer, keras.layers.Layer):
            unique.setdefault(id(layer), layer)
    return list(unique.values())


def weights_read_once(parts):
    """A scope in which the model's weights are tensors read once, before any decoding loop.

    Inside a traced loop each layer then uses these tensors (loop invariants) instead of reading
    its variables at every step: one read per weight, and no variable reads inside the loop
    body, which TFLite's converter cannot freeze into constants.
    """
    variables = {id(v): v for layer in parts_layers(parts) for v in layer.weights}
    return keras.StatelessScope(state_mapping=[(v, ops.stop_gradient(v)) for v in variables.values()])


def forced_at(prefix, step):
    """`(forcing [B] bool, token [B] int32)`: whether each row's target prefix (int32 `[B, P]`, 0-padded) still
    dictates the token at `step`, and which."""
    width = ops.shape(prefix)[1]
    token = ops.take(prefix, ops.minimum(step, width - 1), axis=1)
    return ops.logical_and(ops.less(step, width), ops.not_equal(token, 0)), ops.cast(token, "int32")


def padding_bias(vocab_size, start_id=None):
    """`[vocab]` float32 zeros with `NEG` at id 0 and at `start_id`: padding and the start token are never
    generated (no label ever holds either; transformers' Marian generation bans its pad-and-start token alike)."""
    ids = ops.arange(vocab_size, dtype="int32")
    banned = ops.equal(ids, 0)
    if start_id is not None:
        banned = ops.logical_or(banned, ops.equal(ids, start_id))
    return ops.where(banned, NEG, 0.0)


def first_argmax(logits):
    """int32 `[B]`: the index of each row's largest value in `logits` `[B, V]`, the lowest index on ties.

    Two reductions and a select, which XLA fuses and TFLite has as builtins: cheaper inside a decoding loop than
    `top_k(., 1)` (a sort on XLA CPU) or Keras' TensorFlow `argmax` (an extra pass over the logits for -0.0,
    with BitwiseAnd, no TFLite builtin). A row without a maximum (NaN) gives `V - 1`, never an id out of range.
    """
    vocab = int(logits.shape[-1])
    best = ops.max(logits, axis=-1, keepdims=True)
    candidates = ops.where(ops.greater_equal(logits, best), ops.arange(vocab, dtype="int32"), vocab)
    return ops.minimum(ops.min(candidates, axis=-1), vocab - 1)


def concrete_int(value):
    """`int(value)` when `value` is a concrete tensor, `None` inside a traced function."""
    try:
        return int(ops.convert_to_numpy(value))
    except Exception:  # symbolic tf.Tensor, JAX tracer: the shape must stay static
        return None


def trim_to_longest(tokens):
    """Drop the all-padding columns at the end of `tokens` `[B, max_length]`, when values are concrete.

    A NumPy array (a compiled decoder's output) is trimmed in NumPy and returned as a backend tensor.
    """
    if tokens.shape[0] == 0:
        return ops.convert_to_tensor(tokens)
    if isinstance(tokens, np.ndarray):
        longest = int((tokens != 0).sum(axis=1).max())
        return ops.convert_to_tensor(tokens[:, : max(longest, 1)])
    lengths = ops.sum(ops.cast(ops.not_equal(tokens, 0), "int32"), axis=1)
    longest = concrete_int(ops.max(lengths))
    if longest is None:
        return tokens
    return tokens[:, : max(longest, 1)]
