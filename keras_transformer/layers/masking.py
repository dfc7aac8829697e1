"""Mask helpers shared by the attention layers (internal).

Every mask in this package is boolean with ``True`` meaning "may attend". Masks are merged with
:func:`merge_attention_masks` in one place, and applied with :func:`masked_fill_value`, which picks a
large negative number that is finite in the compute dtype (a bare ``-1e9`` overflows float16).
"""

from keras import ops


def masked_fill_value(dtype):
    """A large negative logit that is finite in ``dtype`` (float16 max is 65504)."""
    dtype = str(dtype)
    if "float16" in dtype and "bfloat16" not in dtype:
        return -6.0e4
    return -1.0e9


def is_per_row(index):
    """Whether a position argument (`start_index`, `cache_index`, `query_offset`) holds one position per row (an
    int vector `[B]`) rather than one for the whole batch (a Python int or a scalar tensor)."""
    return not isinstance(index, int) and len(getattr(index, "shape", ())) == 1


def causal_mask(query_length, key_length, query_offset=0):
    """Boolean lower-triangular mask: query ``i`` sees keys ``<= i + query_offset``.

    ``[Tq, Tk]`` for one offset (a Python int or a scalar tensor); ``[B, Tq, Tk]`` for an int ``[B]`` offset, one
    per row (rows decoding at different depths).
    """
    rows = ops.arange(query_length, dtype="int32")
    cols = ops.expand_dims(ops.arange(key_length, dtype="int32"), 0)
    if is_per_row(query_offset):
        rows = ops.expand_dims(ops.expand_dims(rows, 0) + ops.expand_dims(ops.cast(query_offset, "int32"), 1), -1)
        return ops.greater_equal(rows, ops.expand_dims(cols, 0))
    return ops.greater_equal(ops.expand_dims(rows + query_offset, -1), cols)


def merge_attention_masks(
    batch_size,
    query_length,
    key_length,
    query_mask=None,
    key_mask=None,
    attention_mask=None,
    use_causal_mask=False,
    query_offset=0,
):
    """Combine padding, explicit and causal masks into one boolean ``[B, Tq, Tk]`` mask, or ``None``.

    ``query_mask`` is ``[B, Tq]``, ``key_mask`` is ``[B, Tk]``, ``attention_mask`` is ``[B, Tq, Tk]``
    (or broadcastable to it); ``query_offset`` is one position or an int ``[B]``, one per row. Query padding rows
    are masked too, so padded positions attend to nothing real; their outputs are then zeroed by the Keras mask
    downstream and never reach a real position.
    """
    mask = None
    if key_mask is not None:
        mask = ops.expand_dims(ops.cast(key_mask, "bool"), 1)  # [B, 1, Tk]
    if query_mask is not None:
        q = ops.expand_dims(ops.cast(query_mask, "bool"), -1)  # [B, Tq, 1]
        mask = q if mask is None else ops.logical_and(mask, q)
    if attention_mask is not None:
        a = ops.cast(attention_mask, "bool")
        mask = a if mask is None else ops.logical_and(mask, a)
    if use_causal_mask:
        c = causal_mask(query_length, key_length, query_offset)
        c = c if is_per_row(query_offset) else ops.expand_dims(c, 0)
        mask = c if mask is None else ops.logical_and(mask, c)
    if mask is None:
        return None
    return ops.broadcast_to(mask, (batch_size, query_length, key_length))
