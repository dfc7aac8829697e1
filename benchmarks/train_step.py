"""Training-step speed of keras_transformer vs keras-hub's layers at the same dimensions.

Prints step time, target tokens/s, achieved FLOP/s and the fraction of the machine's measured dense
matmul rate (MFU), for both, and the speed ratio. Runs on any Keras backend:

    python benchmarks/train_step.py                       # TensorFlow, CPU here
    python benchmarks/train_step.py --jit-compile both    # with and without XLA, all four in turn
    KERAS_BACKEND=jax python benchmarks/train_step.py --mixed-precision mixed_bfloat16   # on a GPU
"""

import argparse
import os
import statistics
import sys
import time
import types

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from common import measure_matmul_flops  # noqa: E402
from common import print_table  # noqa: E402
from common import seq2seq_training_flops  # noqa: E402


def build_ours(args):
    from keras_transformer import build_transformer

    return build_transformer(
        args.vocab, args.vocab, num_layers=args.layers, d_model=args.d_model, num_heads=args.heads,
        d_ff=args.d_ff, dropout=args.dropout,
        activation_dropout=args.activation_dropout, max_length=max(args.src_len, args.tgt_len) + 8,
    )


def build_keras_hub(args):
    import keras
    import keras_hub
    from keras import ops

    enc_in = keras.Input((None,), dtype="int32", name="encoder_inputs")
    dec_in = keras.Input((None,), dtype="int32", name="decoder_inputs")
    max_len = max(args.src_len, args.tgt_len) + 8
    enc_mask = ops.not_equal(enc_in, 0)
    dec_mask = ops.not_equal(dec_in, 0)
    x = keras_hub.layers.TokenAndPositionEmbedding(args.vocab, max_len, args.d_model)(enc_in)
    for _ in range(args.layers):
        x = keras_hub.layers.TransformerEncoder(args.d_ff, args.heads, dropout=args.dropout)(x, padding_mask=enc_mask)
    y = keras_hub.layers.TokenAndPositionEmbedding(args.vocab, max_len, args.d_model)(dec_in)
    for _ in range(args.layers):
        y = keras_hub.layers.TransformerDecoder(args.d_ff, args.heads, dropout=args.dropout)(
            y, x, decoder_padding_mask=dec_mask, encoder_padding_mask=enc_mask
        )
    logits = keras.layers.Dense(args.vocab, dtype="float32")(y)
    return keras.Model({"encoder_inputs": enc_in, "decoder_inputs": dec_in}, logits)


def use_keras_dropout(model):
    """Give every `HashDropout` of `model` Keras' own random mask (`keras.random.dropout`, what
    `keras.layers.Dropout` calls): the A/B of the hash-based mask, same model otherwise."""
    import keras

    from keras_transformer.layers import HashDropout

    def call(self, inputs, training=False):
        if training and self.rate > 0:
            return keras.random.dropout(inputs, self.rate, seed=self.seed_generator)
        return inputs

    for layer in model._flatten_layers():
        if isinstance(layer, HashDropout):
            object.__setattr__(layer, "call", types.MethodType(call, layer))
    return model


def compile_and_warm_up(model, args, batch, jit_compile):
    import keras

    model.compile(
        optimizer=keras.optimizers.Adam(1e-4, beta_2=0.98, epsilon=1e-9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    inputs, labels = batch
    for _ in range(2):  # trace, compile, first steps
        model.train_on_batch(inputs, labels)


def time_interleaved(models, batch, steps):
    """Median step time of each model, stepping them in turn so that a busy moment of the machine
    falls on all of them alike (the ratio is what this benchmark reports)."""
    inputs, labels = batch
    times = {name: [] for name in models}
    for _ in range(steps):
        for name, model in models.items():
            start = time.perf_counter()
            model.train_on_batch(inputs, labels)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d-ff", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=3, help="encoder layers = decoder layers")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--src-len", type=int, default=24)
    parser.add_argument("--tgt-len", type=int, default=24)
    parser.add_argument("--dropout", type=float, default=0.1, help="dropout rate of both models")
    parser.add_argument("--activation-dropout", type=float, default=0.0,
                        help="ours' dropout inside the FFN (default 0: keras-hub's blocks have none, equal config)")
    parser.add_argument("--steps", type=int, default=10,
                        help="timed steps of each model, taken in turn (median reported)")
    parser.add_argument("--jit-compile", default="auto", choices=["auto", "true", "false", "both"],
                        help="'both': each model with and without XLA, stepped in turn, and the best of each")
    parser.add_argument("--mixed-precision", default=None, help="e.g. mixed_bfloat16 (GPU)")
    parser.add_argument("--only", choices=["ours", "keras-hub"], default=None)
    parser.add_argument("--with-keras-dropout", action="store_true",
                        help="also time ours with Keras' random dropout masks instead of HashDropout's")
    args = parser.parse_args(argv)
    modes = {"auto": ["auto"], "true": [True], "false": [False], "both": [True, False]}[args.jit_compile]

    import keras

    if args.mixed_precision:
        keras.config.set_dtype_policy(args.mixed_precision)
    rng = np.random.default_rng(0)
    inputs = {
        "encoder_inputs": rng.integers(1, args.vocab, (args.batch, args.src_len)).astype("int32"),
        "decoder_inputs": rng.integers(1, args.vocab, (args.batch, args.tgt_len)).astype("int32"),
    }
    labels = rng.integers(1, args.vocab, (args.batch, args.tgt_len)).astype("int32")
    flops = seq2seq_training_flops(args.batch, args.src_len, args.tgt_len, args.d_model, args.d_ff,
                                   args.layers, args.layers, args.vocab)
    peak = measure_matmul_flops(dtype="bfloat16" if args.mixed_precision == "mixed_bfloat16" else "float32")

    builders = {"keras_transformer": build_ours, "keras-hub": build_keras_hub}
    if args.with_keras_dropout:
        builders["keras_transformer, keras dropout"] = lambda args: use_keras_dropout(build_ours(args))
    suffixes = {mode: "" if len(modes) == 1 else f" ({'XLA' if mode else 'no XLA'})" for mode in modes}
    built = []
    for name, build in builders.items():
        if args.only and not name.startswith(args.only.replace("ours", "keras_transformer")):
            continue
        for mode in modes:
            keras.utils.set_random_seed(0)
            built.append((name + suffixes[mode], build(args), mode))
    # Warm up only once every model is built: re-seeding (tf.random.set_seed) made the next step of an already
    # warmed-up model pay a one-time cost again (~0.7 s without XLA).
    for _, model, mode in built:
        compile_and_warm_up(model, args, (inputs, labels), mode)
    models = {label: model for label, model, _ in built}
    policies = {model.dtype_policy.name for model in models.values()}
    results = time_interleaved(models, (inputs, labels), args.steps)

    rows = []
    for name, seconds in results.items():
        rows.append([
            name, f"{seconds * 1000:.0f}", f"{args.batch * args.tgt_len / seconds:,.0f}",
            f"{flops / seconds / 1e9:.1f}", f"{100 * flops / seconds / peak:.0f}%",
        ])
    print(f"\nbackend={keras.backend.backend()} policy={'/'.join(sorted(policies))} "
          f"jit_compile={'/'.join(str(mode) for mode in modes)} vocab={args.vocab} d_model={args.d_model} "
          f"heads={args.heads} d_ff={args.d_ff} layers={args.layers}+{args.layers} batch={args.batch}x{args.tgt_len}")
    print(f"training step: {flops / 1e9:.1f} GFLOP (matmuls, fwd+bwd); measured matmul rate {peak / 1e9:.1f} GFLOP/s\n")
    print_table(["implementation", "ms/step", "target tok/s", "GFLOP/s", "of matmul rate"], rows)
    print()
    ours = {suffix: results[f"keras_transformer{suffix}"] for suffix in suffixes.values()
            if f"keras_transformer{suffix}" in results}
    hub = {suffix: results[f"keras-hub{suffix}"] for suffix in suffixes.values() if f"keras-hub{suffix}" in results}
    for suffix, seconds in ours.items():
        if suffix in hub:
            print(f"keras_transformer throughput = {hub[suffix] / seconds:.2f}x keras-hub's{suffix}")
        keras_dropout = results.get(f"keras_transformer, keras dropout{suffix}")
        if keras_dropout:
            print(f"HashDropout instead of Keras' random dropout: {keras_dropout / seconds:.2f}x "
                  f"the throughput{suffix}")
    if len(modes) > 1 and ours and hub:
        best_ours, best_hub = min(ours, key=ours.get), min(hub, key=hub.get)
        print(f"best against best: keras_transformer{best_ours} = {hub[best_hub] / ours[best_ours]:.2f}x "
              f"keras-hub{best_hub}")


if __name__ == "__main__":
    main()
