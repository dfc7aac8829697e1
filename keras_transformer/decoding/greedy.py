"""Greedy decoding with key/value caches, and the token-by-token loop that sampling shares."""

from keras import ops

from keras_transformer.decoding import arguments
from keras_transformer.decoding import compiled_decoders
from keras_transformer.decoding import loop_ops


def decode_token_by_token(parts, encoder_inputs, max_length, start_id, end_id, choose, stop_early=True,
                          force_end=False, prefix=None):
    """Run the cached decoder one position per step, choosing each token with `choose`.

    The encoder runs once, the cross-attention keys/values are projected once, and the
    self-attention caches are preallocated at `max_length` positions, so every loop variable
    keeps a static shape (`keras.ops.while_loop`; XLA, SavedModel and TFLite friendly). A row
    stops at `end_id`: its later positions are 0. The loop ends when every row has ended
    (if `stop_early`) or after `max_length` steps.

    Args:
        parts: `TransformerParts`.
        encoder_inputs: int32 `[B, S]` source ids, 0 = padding.
        max_length: Python int, number of positions to decode at most.
        start_id: Python int, the first decoder input.
        end_id: Python int, the id that ends a row.
        choose: callable `(logits [B, V] float32, step) -> int32 [B]`. Padding (id 0) has
            already been removed from `logits`.
        stop_early: bool. Check in the loop condition whether every row has ended.
        force_end: bool. A row that reaches the last position ends there.
        prefix: optional int32 `[B, P]`, each row's forced first tokens (0-padded): the row takes them, whatever
            `choose` says, then goes on choosing.

    Returns:
        int32 `[B, max_length]`: the chosen tokens, 0 after `end_id`.
    """
    with loop_ops.weights_read_once(parts):
        return _decode_token_by_token(parts, encoder_inputs, max_length, start_id, end_id, choose, stop_early,
                                      force_end, prefix)


def _decode_token_by_token(parts, encoder_inputs, max_length, start_id, end_id, choose, stop_early, force_end,
                           prefix=None):
    parts = parts.with_loop_invariants()
    encoder_outputs, padding_mask = parts.encode(encoder_inputs)
    cross_caches = parts.cross_attention_caches(encoder_outputs)
    batch_size = ops.shape(encoder_inputs)[0]
    self_caches = parts.empty_self_attention_caches(batch_size, max_length)
    bias = loop_ops.padding_bias(parts.vocab_size, start_id)
    zero = ops.zeros((), dtype="int32")

    def cond(step, last, finished, tokens, caches):
        running = ops.less(step, max_length)
        if stop_early:
            running = ops.logical_and(running, ops.logical_not(ops.all(finished)))
        return running

    def body(step, last, finished, tokens, caches):
        logits, caches = parts.decode_step(
            ops.expand_dims(last, 1), step, caches, cross_caches, padding_mask
        )
        chosen = ops.cast(choose(logits[:, 0] + bias, step), "int32")
        if prefix is not None:
            forcing, forced = loop_ops.forced_at(prefix, step)
            chosen = ops.where(forcing, forced, chosen)
        if force_end:  # a row that reaches the last position ends there
            chosen = ops.where(ops.equal(step, max_length - 1), end_id, chosen)
        chosen = ops.where(finished, 0, chosen)
        tokens = ops.slice_update(tokens, (zero, step), ops.expand_dims(chosen, 1))
        finished = ops.logical_or(finished, ops.equal(chosen, end_id))
        return step + 1, chosen, finished, tokens, caches

    loop_vars = (
        zero,
        ops.full((batch_size,), start_id, dtype="int32"),
        ops.zeros((batch_size,), dtype="bool"),
        ops.zeros((batch_size, max_length), dtype="int32"),
        self_caches,
    )
    outputs = ops.while_loop(cond, body, loop_vars, maximum_iterations=max_length)
    return outputs[3]


def _argmax(logits, step):
    return loop_ops.first_argmax(logits)


def greedy_search(parts, encoder_inputs, max_length, start_id, end_id, stop_early=True, force_end=False,
                  prefix=None):
    """Greedy decoding at full width: int32 `[B, max_length]`, 0 after `end_id` (never trimmed).

    The entry point for code that traces its own function (an exporter): the output shape is
    static, and `parts` may be a `TransformerParts` (no `keras.Model` needed) or a model. See
    `greedy_decode` for the arguments; `prefix` (int32 `[B, P]`, 0-padded) forces each row's first tokens.
    """
    parts, max_length, start_id, end_id = arguments.check_decoding_args(parts, max_length, start_id, end_id)
    return decode_token_by_token(
        parts, encoder_inputs, max_length, start_id, end_id, _argmax, stop_early=stop_early, force_end=force_end,
        prefix=prefix,
    )


def greedy_decode(model, encoder_inputs, max_length, start_id, end_id, stop_early=True, jit_compile=None,
                  force_end=False):
    """Greedy decoding: at each step the most likely next token, with key/value caches.

    The encoder runs once; each step runs the decoder on one position, reusing the cached
    self-attention keys/values and the cross-attention keys/values projected once. Id 0
    (padding) and `start_id` are never generated. Shapes are static throughout, so the function also runs
    inside `tf.function` (with or without `jit_compile=True`, with input signature
    `[None, None]`), under `jax.jit`, and in an exported SavedModel.

    Args:
        model: a model from `build_transformer` (or loaded back from `.keras`), or its
            `TransformerParts`.
        encoder_inputs: int `[batch, source_length]` source ids, 0 = padding.
        max_length: Python int >= 1. Most tokens to generate per row (`end_id` included).
        start_id: Python int. The first decoder input (begin-of-sequence id).
        end_id: Python int. The id that ends a row.
        stop_early: bool. Stop once every row has produced `end_id` (the loop condition checks
            it); `False` always runs `max_length` steps (same tokens; useful for timing).
        jit_compile: `None` (default): for eager callers on TensorFlow and JAX, run through an XLA-compiled
            function (`jax.jit` on JAX), built once per model and settings and cached; inside your own
            `tf.function`/`jax.jit`, and on PyTorch, the plain function. `True` always compiles (eager inputs
            only), `False` runs eagerly.
        force_end: bool. A row that has not ended by its last position (`max_length`) gets `end_id` there, as
            transformers' `forced_eos_token_id` does (Marian checkpoints set it).

    Returns:
        int32 `[batch, L]`, `L <= max_length`: the tokens after `start_id`. A row that ended
        holds `end_id` at its last token and 0 after it; a row that did not end within
        `max_length` has no `end_id`. Eagerly `L` is the longest row's length; inside a traced
        function `L == max_length` (static shape).

    Example:

    >>> import numpy as np
    >>> from keras_transformer import build_transformer
    >>> model = build_transformer(50, 50, num_layers=1, d_model=16, num_heads=2, d_ff=32)
    >>> tokens = greedy_decode(model, np.array([[5, 6, 7, 0]]), max_length=8, start_id=1, end_id=2)
    >>> tokens.shape[0], tokens.shape[1] <= 8
    (1, True)
    """
    parts, max_length, start_id, end_id = arguments.check_decoding_args(model, max_length, start_id, end_id)
    encoder_inputs = arguments.check_encoder_inputs(encoder_inputs)
    if compiled_decoders.use_compiled(jit_compile, encoder_inputs):
        settings = dict(max_length=max_length, start_id=start_id, end_id=end_id, stop_early=stop_early,
                        force_end=bool(force_end))
        tokens = compiled_decoders.run_compiled(model, parts, greedy_search, {"encoder_inputs": encoder_inputs},
                                                settings)
    else:
        tokens = greedy_search(parts, encoder_inputs, max_length, start_id, end_id, stop_early, bool(force_end))
    return loop_ops.trim_to_longest(tokens)
