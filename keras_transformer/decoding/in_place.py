"""Compiled functions whose cache arguments are updated in place between calls (what `SlotEngine` runs).

`compile_in_place(parts, function, donate)` compiles `function(*args) -> (result, *new_states)` by the backend;
`state_holder(value)` is where a caller keeps a state between calls, `store(holder, value)` replaces it.
"""

import keras

from keras_transformer.decoding import loop_ops


def _variables(parts):
    return list({id(v): v for layer in loop_ops.parts_layers(parts) for v in layer.weights}.values())


def compile_in_place(parts, function, donate=()):
    """`function(*args) -> (result, *new_states)` compiled by the backend, where `new_states` are the new values of
    the arguments at `donate` (the engine's caches). The compiled function returns `(result, *states)` likewise.

    TensorFlow: XLA (`tf.function(jit_compile=True)`), the states held in `tf.Variable`s (`state_holder`) and updated in
    place (XLA aliases a variable's update to its buffer: no copy of the caches per call). JAX: `jax.jit` with the
    weights passed as arguments and the states donated (updated in place). PyTorch: the function itself, without
    autograd.

    On TensorFlow the compiled function is traced for the shapes of its first call and takes those shapes only (a
    call with others is refused): make one per shape, as `SlotEngine` does."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        def in_place(*args):
            values = list(args)
            for i in donate:
                values[i] = tf.nest.map_structure(lambda variable: variable.read_value(), args[i])
            result, *states = function(*values)
            for i, state in zip(donate, states):
                for variable, value in zip(tf.nest.flatten(args[i]), tf.nest.flatten(state)):
                    variable.assign(value)
            return result

        compiled = tf.function(in_place, jit_compile=True, autograph=False)
        concrete = []  # traced on the first call; called directly after (no signature lookup per call)

        def call(*args):
            if not concrete:
                concrete.append(compiled.get_concrete_function(*args))
            return (concrete[0](*args), *(args[i] for i in donate))

        return call
    variables = _variables(parts)
    if backend == "jax":
        import jax

        def pure(weights, *args):
            with keras.StatelessScope(state_mapping=list(zip(variables, weights))):
                return function(*args)

        jitted = jax.jit(pure, donate_argnums=tuple(i + 1 for i in donate))
        return lambda *args: jitted([v.value for v in variables], *args)

    def eager(*args):
        import torch

        with torch.no_grad():
            return function(*args)

    return eager


def state_holder(value):
    """Where the engine keeps a cache between calls: a `tf.Variable` on TensorFlow (updated in place by the
    compiled functions), the array itself elsewhere."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.Variable(value, trainable=False)
    return value


def store(holder, value):
    """`value` kept where `holder` was: assigned into it on TensorFlow (the same variable, so a compiled function
    that took it does not trace again), `value` itself elsewhere."""
    if keras.backend.backend() == "tensorflow":
        holder.assign(value)
        return holder
    return value
