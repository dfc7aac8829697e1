"""The pieces every decoder shares: argument checks, the padding bias, first-argmax, output trimming.

Every decoder in this package works on a `TransformerParts` and keeps static shapes: the outputs
are first built at full width `[batch, max_length]` and only trimmed to the longest decoded row
when the values are concrete (eager execution). Inside a traced function (`tf.function`,
`jax.jit`, an exported SavedModel) the full width is returned, so shapes stay static.
"""

import numbers

import keras
from keras import ops

from keras_transformer.models.ensemble import EnsembleParts
from keras_transformer.models.inference import TransformerParts

# A logit that removes a token: exp(NEG - max) is exactly 0 in float32, and sums of a few
# thousand of them stay finite (decoders accumulate float32 log-probabilities only).
NEG = -1.0e9


def resolve_parts(model):
    """A `TransformerParts` from a `build_transformer` model (or the parts themselves, or an `EnsembleParts`)."""
    if isinstance(model, (TransformerParts, EnsembleParts)):
        return model
    if not isinstance(model, keras.Model):
        raise TypeError(
            "`model` must be a keras.Model made by `keras_transformer.build_transformer` (or loaded "
            f"back from `.keras`), or a `TransformerParts`; got {type(model).__name__}."
        )
    return TransformerParts.from_model(model)


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


def is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_max_length(max_length, parts):
    if not is_int(max_length):
        raise TypeError(
            "`max_length` must be a Python int (it sizes the preallocated caches); "
            f"got {max_length!r} of type {type(max_length).__name__}."
        )
    if max_length < 1:
        raise ValueError(f"`max_length` must be >= 1; got {max_length}.")
    embedding = parts.decoder_embedding
    if getattr(embedding, "position", None) == "learned" and max_length > embedding.max_length:
        raise ValueError(
            f"`max_length={max_length}` exceeds the {embedding.max_length} positions of the model's "
            "learned position table; decode at most that many tokens."
        )
    return int(max_length)


def check_token_id(name, value, vocab_size):
    if not is_int(value):
        raise TypeError(f"`{name}` must be a Python int; got {value!r} of type {type(value).__name__}.")
    if not 1 <= value < vocab_size:
        raise ValueError(
            f"`{name}={value}` is outside the target vocabulary: expected 1 <= {name} < {vocab_size} "
            "(id 0 is padding)."
        )
    return int(value)


def check_positive_int(name, value):
    if not is_int(value):
        raise TypeError(f"`{name}` must be a Python int; got {value!r} of type {type(value).__name__}.")
    if value < 1:
        raise ValueError(f"`{name}` must be >= 1; got {value}.")
    return int(value)


def check_number(name, value, low=None, low_inclusive=True, high=None):
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"`{name}` must be a number; got {value!r} of type {type(value).__name__}.")
    value = float(value)
    too_low = low is not None and (value < low if low_inclusive else value <= low)
    too_high = high is not None and value > high
    if too_low or too_high or value != value:
        low_text = "" if low is None else f"{low} {'<=' if low_inclusive else '<'} "
        high_text = "" if high is None else f" <= {high}"
        raise ValueError(f"`{name}` must satisfy {low_text}{name}{high_text}; got {value}.")
    return value


def check_decoding_args(model, max_length, start_id, end_id):
    """`(parts, max_length, start_id, end_id)` after the checks every decoder shares."""
    parts = resolve_parts(model)
    max_length = check_max_length(max_length, parts)
    start_id = check_token_id("start_id", start_id, parts.vocab_size)
    end_id = check_token_id("end_id", end_id, parts.vocab_size)
    return parts, max_length, start_id, end_id


def check_encoder_inputs(encoder_inputs):
    ids = ops.convert_to_tensor(encoder_inputs)
    if len(ids.shape) != 2:
        raise ValueError(
            f"`encoder_inputs` must be token ids of shape [batch, source_length]; got shape {tuple(ids.shape)}."
        )
    dtype = keras.backend.standardize_dtype(ids.dtype)
    if "int" not in dtype:
        raise TypeError(f"`encoder_inputs` must hold integer token ids; got dtype {dtype}.")
    return ops.cast(ids, "int32")


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
    """Drop the all-padding columns at the end of `tokens` `[B, max_length]`, when values are concrete."""
    if tokens.shape[0] == 0:
        return tokens
    lengths = ops.sum(ops.cast(ops.not_equal(tokens, 0), "int32"), axis=1)
    longest = concrete_int(ops.max(lengths))
    if longest is None:
        return tokens
    return tokens[:, : max(longest, 1)]
