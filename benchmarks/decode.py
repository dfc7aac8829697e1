"""Benchmark: tokens/s of KV-cached greedy decoding against re-decoding and keras-hub's cached decoder.

Every method generates a fixed number of tokens (no early stop) from random weights at the same
dimensions, with the whole decoding loop inside one compiled function (`tf.function`, with and
without `jit_compile=True`; `jax.jit` on the JAX backend). Each function is run once to warm up
(trace and compile), then all are timed in turn, `--repeats` rounds (so a busy machine slows every
method alike); the table shows the median (and the best run).

Methods:
- ours (greedy_decode): the public call with its defaults, `greedy_decode(model, ids, ...)` from Python (compiled
  and cached by the library on TensorFlow and JAX; eager on PyTorch): what a user gets without writing a
  compiled function. Its XLA column says whether the default compiled.
- ours (cached): `keras_transformer.decoding.greedy_search`, one decoder position per step with
  preallocated key/value caches, the encoder and cross-attention projections run once.
- re-decode (prefix): the full model (encoder + decoder + output projection) re-run on the whole
  growing prefix at every step (`tf.while_loop` with a dynamic prefix shape; not XLA-compilable).
- re-decode (fixed buffer): the same on a fixed `[batch, tokens]` decoder buffer (static shapes, so
  it compiles with XLA; it processes every position at every step).
- keras-hub (cached): `keras_hub.layers.TransformerEncoder`/`TransformerDecoder` with
  `self_attention_cache`/`self_attention_cache_update_index` and a cross-attention cache computed
  at the first step and reused, in the same `keras.ops.while_loop` (any backend).

With `--saved-model` (TensorFlow), each compiled function is also saved as a SavedModel (a `tf.Module` with the
weights and the function, `[None, None]` int32 input signature), loaded back and timed: the decoding loop as a
serving binary runs it.

Usage:
    python benchmarks/decode.py                  # defaults: the issue's configuration
    python benchmarks/decode.py --saved-model --skip-redecode
    python benchmarks/decode.py --batch-sizes 1 --repeats 3
    KERAS_BACKEND=jax python benchmarks/decode.py  # e.g. on a GPU (jax.jit; no TensorFlow needed)
"""

import argparse
import atexit
import functools
import importlib.util
import os
import shutil
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

from keras_transformer import build_transformer  # noqa: E402
from keras_transformer.decoding import greedy_decode  # noqa: E402
from keras_transformer.decoding import greedy_search  # noqa: E402
from keras_transformer.models import TransformerParts  # noqa: E402

START_ID, END_ID = 1, 2


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Tokens/s of cached greedy decoding vs re-decoding and keras-hub's cached decoder loop."
    )
    parser.add_argument("--tokens", type=int, default=32, help="tokens generated per row (fixed, no early stop)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--source-length", type=int, default=24)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--num-heads", type=int, default=8)
    parser.add_argument("--d-ff", type=int, default=1024)
    parser.add_argument("--num-layers", type=int, default=3, help="encoder and decoder blocks each")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per method (median reported)")
    parser.add_argument("--tie-output", action="store_true",
                        help="ours with shared embeddings and a tied output projection (the Multi30k recipe's model)")
    parser.add_argument("--skip-keras-hub", action="store_true")
    parser.add_argument("--skip-redecode", action="store_true")
    parser.add_argument("--no-xla", action="store_true", help="skip the jit_compile=True variants")
    parser.add_argument("--saved-model", action="store_true",
                        help="also time each function saved as a SavedModel and loaded back (TensorFlow only)")
    parser.add_argument("--threads", type=int, default=None, help="intra-op threads (TensorFlow; default: all)")
    return parser.parse_args(argv)


DEFAULT_CALL = "ours (greedy_decode)"


def compile_function(fn, xla):
    """The backend's compiled function, or `None` when the backend has no such variant."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=xla)
    if backend == "jax" and xla:
        import jax

        return jax.jit(fn)
    return None


def saved_model_function(decode, xla, directory):
    """`decode` saved in a SavedModel with the weights of `decode.tracked` (its layers/models), loaded back."""
    import tensorflow as tf

    module = tf.Module()
    module.tracked = list(decode.tracked)
    module.decode = tf.function(decode, jit_compile=xla, input_signature=[tf.TensorSpec([None, None], tf.int32)])
    tf.saved_model.save(module, directory)
    loaded = tf.saved_model.load(directory)
    return lambda ids: loaded.decode(ids)  # keeps `loaded` (which owns the variables) alive


def time_once(fn, inputs):
    """Seconds of one call, outputs fetched."""
    start = time.perf_counter()
    np.asarray(ops.convert_to_numpy(fn(inputs)))
    return time.perf_counter() - start


def ours_cached(model, tokens):
    parts = TransformerParts.from_model(model)

    def decode(ids):
        return greedy_search(parts, ids, tokens, START_ID, END_ID, stop_early=False)

    decode.tracked = [model]
    return decode


def redecode_fixed_buffer(model, tokens):
    """Full forward pass per step over a fixed-size decoder buffer (static shapes, keras.ops)."""

    def decode(ids):
        batch = ops.shape(ids)[0]
        buffer = ops.concatenate(
            [ops.full((batch, 1), START_ID, dtype="int32"), ops.zeros((batch, tokens - 1), dtype="int32")], axis=1
        )
        columns = ops.arange(tokens, dtype="int32")[None]

        def body(step, buffer, out):
            logits = model({"encoder_inputs": ids, "decoder_inputs": buffer}, training=False)
            logits = ops.take(logits, step, axis=1)[:, 1:]  # position `step`; padding never chosen
            chosen = ops.cast(ops.argmax(logits, axis=-1), "int32") + 1
            buffer = ops.where(ops.equal(columns, step + 1), chosen[:, None], buffer)
            out = ops.where(ops.equal(columns, step), chosen[:, None], out)
            return step + 1, buffer, out

        start = (ops.zeros((), "int32"), buffer, ops.zeros((batch, tokens), "int32"))
        return ops.while_loop(lambda step, *_: ops.less(step, tokens), body, start)[2]

    return decode


def redecode_prefix(model, tokens):
    """Full forward pass per step over the growing prefix (TensorFlow: dynamic shapes in the loop)."""
    import tensorflow as tf

    def decode(ids):
        prefix = tf.fill([tf.shape(ids)[0], 1], START_ID)

        def body(step, prefix):
            logits = model({"encoder_inputs": ids, "decoder_inputs": prefix}, training=False)
            chosen = tf.argmax(logits[:, -1, 1:], axis=-1, output_type=tf.int32) + 1
            return step + 1, tf.concat([prefix, chosen[:, None]], axis=1)

        _, prefix = tf.while_loop(
            lambda step, _: step < tokens,
            body,
            [tf.constant(0), prefix],
            shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, None])],
        )
        return prefix[:, 1:]

    return decode


def _argmax_int32(logits):
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        # tf.argmax directly: keras.ops.argmax on TensorFlow adds a pass over the logits for -0.0.
        return tf.argmax(logits, axis=-1, output_type=tf.int32)
    return ops.cast(ops.argmax(logits, axis=-1), "int32")


def keras_hub_cached(args):
    """keras-hub's cached encoder-decoder greedy loop at the same dimensions (random weights; any backend)."""
    import keras_hub

    d, heads, tokens, length = args.d_model, args.num_heads, args.tokens, args.source_length
    head_dim = d // heads
    enc_embedding = keras_hub.layers.TokenAndPositionEmbedding(args.vocab_size, max(length, tokens), d)
    dec_embedding = keras_hub.layers.TokenAndPositionEmbedding(args.vocab_size, max(length, tokens), d)
    encoders = [keras_hub.layers.TransformerEncoder(args.d_ff, heads) for _ in range(args.num_layers)]
    decoders = [keras_hub.layers.TransformerDecoder(args.d_ff, heads) for _ in range(args.num_layers)]
    output = keras.layers.Dense(args.vocab_size)
    # Build everything with one uncached call.
    src = np.ones((1, length), "int32")
    x = enc_embedding(src)
    for layer in encoders:
        x = layer(x)
    y = dec_embedding(np.ones((1, 2), "int32"))
    for layer in decoders:
        y = layer(y, x)
    output(y)

    def decode(ids):
        batch, source_length = ops.shape(ids)[0], ops.shape(ids)[1]
        mask = ops.not_equal(ids, 0)
        x = enc_embedding(ids)
        for layer in encoders:
            x = layer(x, padding_mask=mask)

        def step_logits(token, step, self_caches, cross_caches, first):
            y = dec_embedding(token[:, None], start_index=step)
            new_self, new_cross = [], []
            for layer, self_cache, cross_cache in zip(decoders, self_caches, cross_caches):
                y, self_cache, cross_cache = layer(
                    y, x,
                    encoder_padding_mask=mask,
                    self_attention_cache=self_cache,
                    self_attention_cache_update_index=step,
                    cross_attention_cache=cross_cache,
                    cross_attention_cache_update_index=0 if first else None,
                )
                new_self.append(self_cache)
                new_cross.append(cross_cache)
            chosen = _argmax_int32(output(y)[:, 0, 1:]) + 1
            return chosen, new_self, new_cross

        zeros_self = [ops.zeros((batch, 2, tokens, heads, head_dim)) for _ in decoders]
        zeros_cross = [ops.zeros((batch, 2, source_length, heads, head_dim)) for _ in decoders]
        start = ops.full((batch,), START_ID, dtype="int32")
        # Step 0 computes the cross-attention caches; the loop reuses them.
        chosen, self_caches, cross_caches = step_logits(start, 0, zeros_self, zeros_cross, first=True)
        columns = ops.arange(tokens, dtype="int32")[None]
        out = ops.where(ops.equal(columns, 0), chosen[:, None], ops.zeros((batch, tokens), dtype="int32"))

        def body(step, token, out, self_caches):
            chosen, self_caches, _ = step_logits(token, step, self_caches, cross_caches, first=False)
            out = ops.where(ops.equal(columns, step), chosen[:, None], out)
            return step + 1, chosen, out, self_caches

        start_vars = (ops.convert_to_tensor(1, dtype="int32"), chosen, out, self_caches)
        _, _, out, _ = ops.while_loop(lambda step, *_: ops.less(step, tokens), body, start_vars)
        return out

    decode.tracked = [enc_embedding, dec_embedding, *encoders, *decoders, output]

    return decode


def main(argv=None):
    args = parse_args(argv)
    backend = keras.backend.backend()
    if args.saved_model and backend != "tensorflow":
        raise SystemExit("--saved-model needs the TensorFlow backend (KERAS_BACKEND=tensorflow).")
    if args.threads and backend == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    keras.utils.set_random_seed(0)
    model = build_transformer(
        args.vocab_size, args.vocab_size, num_layers=args.num_layers, d_model=args.d_model,
        num_heads=args.num_heads, d_ff=args.d_ff, dropout=0.0, max_length=max(256, args.tokens),
        share_embeddings=args.tie_output, tie_output=args.tie_output,
    )
    methods = [("ours (cached)", lambda: ours_cached(model, args.tokens), (False, True))]
    if not args.skip_redecode:
        if backend == "tensorflow":
            methods.append(("re-decode (prefix)", lambda: redecode_prefix(model, args.tokens), (False,)))
        methods.append(
            ("re-decode (fixed buffer)", lambda: redecode_fixed_buffer(model, args.tokens), (False, True))
        )
    if not args.skip_keras_hub and importlib.util.find_spec("keras_hub") is None:
        print("keras-hub is not installed: its rows are skipped")
    elif not args.skip_keras_hub:
        methods.append(("keras-hub (cached)", lambda: keras_hub_cached(args), (False, True)))

    print(
        f"backend {backend}; {args.num_layers}+{args.num_layers} layers, d_model {args.d_model}, "
        f"{args.num_heads} heads, d_ff {args.d_ff}, vocab {args.vocab_size}; source length "
        f"{args.source_length}; {args.tokens} tokens per row (fixed); median of {args.repeats} runs"
        + ("; ours: shared embeddings, tied output (keras-hub's head stays a Dense)" if args.tie_output else "")
    )
    header = f"{'method':<34} {'batch':>5} {'XLA':>4} {'ms/step':>9} {'tokens/s':>10} {'best ms/step':>13}"
    print(header)
    print("-" * len(header))
    rng = np.random.default_rng(0)
    results = {}
    for batch in args.batch_sizes:
        ids = rng.integers(3, args.vocab_size, (batch, args.source_length)).astype("int32")
        functions = []
        default_call = functools.partial(greedy_decode, model, max_length=args.tokens, start_id=START_ID,
                                         end_id=END_ID, stop_early=False)
        np.asarray(ops.convert_to_numpy(default_call(ids)))  # warm-up: the library compiles and caches
        functions.append((DEFAULT_CALL, backend != "torch", default_call))
        for name, make, xla_options in methods:
            decode = make()
            for xla in xla_options:
                fn = None if (xla and args.no_xla) else compile_function(decode, xla)
                if fn is not None:
                    np.asarray(ops.convert_to_numpy(fn(ids)))  # warm-up: trace and compile
                    functions.append((name, xla, fn))
                if fn is not None and args.saved_model and hasattr(decode, "tracked"):
                    directory = tempfile.mkdtemp(prefix="decode_saved_model_")
                    atexit.register(shutil.rmtree, directory, ignore_errors=True)  # loaded until the run ends
                    loaded = saved_model_function(decode, xla, directory)
                    np.asarray(ops.convert_to_numpy(loaded(ids)))  # warm-up
                    functions.append((f"{name} [SavedModel]", xla, loaded))
        # Round robin: each repeat times every method once, so load changes hit all of them alike.
        times = {(name, xla): [] for name, xla, _ in functions}
        for _ in range(args.repeats):
            for name, xla, fn in functions:
                times[(name, xla)].append(time_once(fn, ids))
        for name, xla, _ in functions:
            runs = times[(name, xla)]
            seconds = statistics.median(runs)
            results[(name, batch, xla)] = seconds
            print(
                f"{name:<34} {batch:>5} {'yes' if xla else 'no':>4} {1000 * seconds / args.tokens:>9.2f} "
                f"{batch * args.tokens / seconds:>10.0f} {1000 * min(runs) / args.tokens:>13.2f}",
                flush=True,
            )

    print()
    print("speed-ups of ours (cached), from the medians (time of the other / time of ours):")
    for batch in args.batch_sizes:
        for xla in (False, True):
            ours = results.get(("ours (cached)", batch, xla))
            if ours is None:
                continue
            for name in ("re-decode (prefix)", "re-decode (fixed buffer)", "keras-hub (cached)"):
                other = results.get((name, batch, xla))
                if other is not None:
                    print(f"  batch {batch:>2}, XLA {'yes' if xla else 'no ':<3}: {other / ours:5.2f}x vs {name}")
            default = results.get((DEFAULT_CALL, batch, xla))
            hub = results.get(("keras-hub (cached)", batch, True))
            if default is not None and hub is not None:
                print(f"  batch {batch:>2}: {hub / default:5.2f}x the default call greedy_decode(...) vs keras-hub "
                      "(cached), compiled (XLA)")
            ours_saved = results.get(("ours (cached) [SavedModel]", batch, xla))
            hub_saved = results.get(("keras-hub (cached) [SavedModel]", batch, xla))
            if ours_saved is not None and hub_saved is not None:
                print(f"  batch {batch:>2}, XLA {'yes' if xla else 'no ':<3}: {hub_saved / ours_saved:5.2f}x vs "
                      "keras-hub (cached), both inside a SavedModel")
        ours_best = min(v for (n, b, _), v in results.items() if n == "ours (cached)" and b == batch)
        others = {n: min(v for (m, b, _), v in results.items() if m == n and b == batch)
                  for (n, b, _) in results if b == batch and not n.startswith("ours")}
        for name, best in others.items():
            print(f"  batch {batch:>2}, best vs best: {best / ours_best:5.2f}x vs {name}")
    print(f"done: {len(results)} timings")


if __name__ == "__main__":
    main()
