"""The decoders XLA-compiled (`jit_compile=True`, the default for eager calls on TensorFlow and JAX) through
Keras' own compiled predict step, cached per model.

A decoder with fixed settings is wrapped in a small `keras.Model` compiled with
`jit_compile=True`, so Keras builds the backend's compiled function (`tf.function(jit_compile=True)`
on TensorFlow, `jax.jit` on JAX) and retraces it only for new input shapes. The wrappers are
cached per model (weakly) and per settings (the 32 most recently used: `LRUCache`), so repeated calls reuse the
compiled code and a caller trying ever new settings does not grow the process.
"""

import weakref

import keras
from keras import ops

from keras_transformer.decoding import loop_ops
from keras_transformer.decoding.lru import LRUCache

_CACHE = weakref.WeakKeyDictionary()
SETTINGS_KEPT = 32  # compiled decoders kept per model: the most recently used settings


class _DecodingModel(keras.Model):
    """Runs `function(parts, **inputs, **settings)`; tracks the parts' layers so Keras passes their weights."""

    def __init__(self, parts, function, input_names, settings, owner):
        super().__init__(name=f"compiled_{function.__name__}")
        # Parts made from a model live here; parts the user passed (the cache key) are held weakly,
        # or the cache entry would keep its own key alive.
        self._parts_strong = None if parts is owner else parts
        self._parts_weak = weakref.ref(parts)
        self._function = function
        self._input_names = tuple(input_names)
        self._settings = dict(settings)
        self.decoding_layers = loop_ops.parts_layers(parts)
        self.built = True

    def call(self, inputs):
        named = dict(zip(self._input_names, inputs))
        return self._function(self._parts_weak(), **named, **self._settings)


def is_traced(tensor):
    """Whether `tensor` belongs to a function being traced (`tf.function`, `jax.jit`) rather than an eager call."""
    name = keras.backend.backend()
    if name == "tensorflow":
        import tensorflow as tf

        return not tf.executing_eagerly()
    if name == "jax":
        import jax

        tracer = getattr(getattr(jax, "core", None), "Tracer", None)
        return isinstance(tensor, tracer) if tracer is not None else type(tensor).__name__.endswith("Tracer")
    return loop_ops.concrete_int(ops.size(tensor)) is None


def use_compiled(jit_compile, encoder_inputs):
    """Whether a decoder called with `jit_compile` runs compiled.

    `None` (the default) compiles on TensorFlow and JAX when the inputs are concrete (an eager call), and runs
    the plain function inside a caller's own `tf.function`/`jax.jit` (whose compiler then compiles it) and on
    PyTorch, whose `torch.compile` unrolls the decoding loop and takes minutes to compile it. `True` and `False`
    are followed as given.
    """
    if jit_compile is None:
        return keras.backend.backend() != "torch" and not is_traced(encoder_inputs)
    if not isinstance(jit_compile, bool):
        raise TypeError(f"`jit_compile` must be True, False or None; got {jit_compile!r}")
    return jit_compile


def forget(owner):
    """Drops the compiled decoders cached for `owner` (after its layers changed, e.g. quantized)."""
    _CACHE.pop(owner, None)


def run_compiled(owner, parts, function, inputs, settings):
    """`function(parts, **inputs, **settings)` through a cached, XLA-compiled Keras predict step.

    Args:
        owner: the object the cache entry lives as long as (the model or parts the user passed).
        parts: `TransformerParts`.
        function: a full-width decoder such as `greedy_search`.
        inputs: dict of tensors (they may change between calls without recompiling, as long as
            their shapes do not).
        settings: dict of Python values (a new combination compiles a new function).

    Returns:
        The function's outputs as NumPy arrays (what Keras' predict step gives back).
    """
    for name, value in inputs.items():
        if is_traced(value):
            raise ValueError(
                f"`jit_compile=True` compiles a function for eager callers, but `{name}` is symbolic: "
                "inside your own `tf.function`/`jax.jit`, call the decoder without `jit_compile` "
                "(the compiler of the enclosing function compiles it)."
            )
    key = (function.__module__, function.__name__, tuple(inputs), tuple(sorted(settings.items())))
    per_owner = _CACHE.get(owner)
    if per_owner is None:
        per_owner = _CACHE[owner] = LRUCache(SETTINGS_KEPT)

    def make():
        wrapper = _DecodingModel(parts, function, inputs.keys(), settings, owner)
        wrapper.compile(jit_compile=True)
        return wrapper

    wrapper = per_owner.get(key, make)
    outputs = wrapper.predict_on_batch(tuple(inputs.values()))
    return tuple(outputs) if isinstance(outputs, (tuple, list)) else outputs
