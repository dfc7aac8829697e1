"""The argument checks every decoder shares: the model (as `TransformerParts`), `max_length`, token ids, numbers
and the source ids.
"""

import numbers

import keras
from keras import ops

from keras_transformer.models.ensemble import EnsembleParts
from keras_transformer.models.transformer_parts import TransformerParts


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
