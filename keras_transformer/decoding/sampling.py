"""Random sampling with temperature, top-k and top-p (nucleus) filtering, and key/value caches."""

import random

import keras
from keras import ops

from keras_transformer.decoding import arguments
from keras_transformer.decoding import compiled_decoders
from keras_transformer.decoding import loop_ops
from keras_transformer.decoding.greedy import decode_token_by_token


def _pick_by_cumulative_mass(probs, uniform):
    """Inverse-CDF sampling: the first index whose cumulative mass reaches `uniform * total`.

    Entries of probability 0 are never picked (as long as `uniform > 0`).
    """
    cumulative = ops.cumsum(probs, axis=-1)
    threshold = ops.expand_dims(uniform, 1) * cumulative[:, -1:]
    return ops.sum(ops.cast(ops.less(cumulative, threshold), "int32"), axis=-1)


def sampling_choice(vocab_size, uniforms, temperature=1.0, top_k=None, top_p=None):
    """A `choose(logits [B, V], step) -> ids [B]` that samples with the given filters.

    `uniforms` is float32 `[B, max_length]` in `(0, 1)`: the random number each row uses at
    each step (drawn once, before the loop, so the loop body holds no random state).
    """
    def choose(logits, step):
        return sample_token(logits, ops.take(uniforms, step, axis=1), vocab_size, temperature, top_k, top_p)

    return choose


def sample_token(logits, uniform, vocab_size, temperature=1.0, top_k=None, top_p=None):
    """int32 `[B]`: one token per row of `logits` `[B, V]`, drawn with the filters by inverse CDF at `uniform` `[B]`
    (each row's random number in `(0, 1)`)."""
    scaled = logits / temperature if temperature != 1.0 else logits
    if top_k is None and top_p is None:
        return _pick_by_cumulative_mass(ops.softmax(scaled, axis=-1), uniform)
    k = vocab_size if top_k is None else min(top_k, vocab_size)
    values, indices = ops.top_k(scaled, k)  # sorted, best first
    probs = ops.softmax(values, axis=-1)
    if top_p is not None:
        # Keep the shortest prefix whose mass reaches top_p: a token stays if the mass
        # before it is still below top_p (the best token always stays).
        before = ops.cumsum(probs, axis=-1) - probs
        probs = ops.where(ops.less(before, top_p), probs, 0.0)
    picked = _pick_by_cumulative_mass(probs, uniform)
    return ops.take_along_axis(ops.cast(indices, "int32"), ops.expand_dims(picked, 1), axis=1)[:, 0]


def check_filters(temperature, top_k, top_p):
    temperature = arguments.check_number("temperature", temperature, low=0.0, low_inclusive=False)
    if top_k is not None:
        top_k = arguments.check_positive_int("top_k", top_k)
    if top_p is not None:
        top_p = arguments.check_number("top_p", top_p, low=0.0, low_inclusive=False, high=1.0)
    return temperature, top_k, top_p


def draw_uniforms(batch_size, max_length, seed):
    """float32 `[batch_size, max_length]` uniform numbers in `(0, 1)` from a stateless generator."""
    return keras.random.uniform((batch_size, max_length), minval=1e-7, maxval=1.0, dtype="float32", seed=seed)


def sample_with_parts(
    parts, encoder_inputs, max_length, start_id, end_id, temperature=1.0, top_k=None, top_p=None,
    seed=0, stop_early=True, uniforms=None,
):
    """Sampling at full width: int32 `[B, max_length]`, 0 after `end_id` (never trimmed).

    The entry point for code that traces its own function (an exporter): shapes are static, and
    `parts` may be a `TransformerParts` (no `keras.Model` needed) or a model. `seed` must be a
    Python int here; alternatively pass `uniforms`, float32 `[B, max_length]` in `(0, 1)`, the
    random number each row uses at each step. An exported function can take them as an input or
    draw them with its own random op; TFLite has no builtin for the stateless generator that
    `seed` uses, so a TFLite model needs `uniforms`. See `sample_decode` for the other arguments.
    """
    parts, max_length, start_id, end_id = arguments.check_decoding_args(parts, max_length, start_id, end_id)
    temperature, top_k, top_p = check_filters(temperature, top_k, top_p)
    if uniforms is None:
        uniforms = draw_uniforms(ops.shape(encoder_inputs)[0], max_length, seed)
    choose = sampling_choice(parts.vocab_size, uniforms, temperature, top_k, top_p)
    return decode_token_by_token(
        parts, encoder_inputs, max_length, start_id, end_id, choose, stop_early=stop_early
    )


def sample_decode(model, encoder_inputs, max_length, start_id, end_id, temperature=1.0, top_k=None, top_p=None,
                  seed=None, stop_early=True, jit_compile=None):
    """Random sampling, token by token with key/value caches: temperature, top-k, top-p.

    At each step the logits are divided by `temperature`; `top_k` keeps the `top_k` most likely
    tokens, `top_p` (nucleus sampling) the fewest most likely tokens whose probability adds up
    to at least `top_p` (after `top_k` when both are given); the next token is drawn from the
    renormalized distribution. `top_k=1` is greedy decoding. Id 0 and `start_id` are never generated.
    The random numbers come from a stateless generator seeded by `seed`: the same seed, inputs
    and model give the same tokens, eagerly and in compiled functions alike. Shapes are static
    (`tf.function`, XLA, `jax.jit`, SavedModel).

    Args:
        model: a model from `build_transformer` (or loaded back from `.keras`), or its
            `TransformerParts`.
        encoder_inputs: int `[batch, source_length]` source ids, 0 = padding.
        max_length: Python int >= 1. Most tokens to generate per row (`end_id` included).
        start_id: Python int. The first decoder input.
        end_id: Python int. The id that ends a row.
        temperature: float > 0. Below 1 sharpens, above 1 flattens the distribution.
        top_k: Python int >= 1, or `None` for no top-k filter.
        top_p: float in `(0, 1]`, or `None` for no nucleus filter.
        seed: Python int, or `None` for a fresh seed drawn at each Python call (inside a
            traced function that seed is fixed when the function is traced: pass seeds
            explicitly there).
        stop_early: bool. Stop once every row has produced `end_id`.
        jit_compile: `None` (default): for eager callers on TensorFlow and JAX, run through an XLA-compiled
            function (`jax.jit` on JAX), built once per model and settings and cached; inside your own
            `tf.function`/`jax.jit`, and on PyTorch, the plain function. `True` always compiles (eager inputs
            only), `False` runs eagerly.

    Returns:
        int32 `[batch, L]`, `L <= max_length`: the sampled tokens after `start_id`, with
        `end_id` at a row's end and 0 after it. Eagerly `L` is the longest row's length; inside
        a traced function `L == max_length`.

    Example:

    >>> import numpy as np
    >>> from keras_transformer import build_transformer
    >>> model = build_transformer(50, 50, num_layers=1, d_model=16, num_heads=2, d_ff=32)
    >>> src = np.array([[5, 6, 7]])
    >>> a = sample_decode(model, src, 8, start_id=1, end_id=2, top_p=0.9, seed=3)
    >>> b = sample_decode(model, src, 8, start_id=1, end_id=2, top_p=0.9, seed=3)
    >>> bool(np.array_equal(a, b))
    True

    References:
        - [Fan et al., 2018](https://arxiv.org/abs/1805.04833) (top-k sampling).
        - [Holtzman et al., 2020](https://arxiv.org/abs/1904.09751) (nucleus sampling).
    """
    parts, max_length, start_id, end_id = arguments.check_decoding_args(model, max_length, start_id, end_id)
    temperature, top_k, top_p = check_filters(temperature, top_k, top_p)
    if seed is None:
        seed = random.randrange(2**31)
    elif not arguments.is_int(seed):
        raise TypeError(f"`seed` must be a Python int or None; got {seed!r} of type {type(seed).__name__}.")
    encoder_inputs = arguments.check_encoder_inputs(encoder_inputs)
    uniforms = draw_uniforms(ops.shape(encoder_inputs)[0], max_length, int(seed))
    settings = dict(
        max_length=max_length, start_id=start_id, end_id=end_id, temperature=temperature,
        top_k=top_k, top_p=top_p, stop_early=stop_early,
    )
    # The random numbers are an input, so one compiled function serves every seed.
    if compiled_decoders.use_compiled(jit_compile, encoder_inputs):
        inputs = {"encoder_inputs": encoder_inputs, "uniforms": uniforms}
        tokens = compiled_decoders.run_compiled(model, parts, sample_with_parts, inputs, settings)
    else:
        tokens = sample_with_parts(parts, encoder_inputs, uniforms=uniforms, **settings)
    return loop_ops.trim_to_longest(tokens)
