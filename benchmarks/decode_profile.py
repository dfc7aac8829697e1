"""Profile: where a step of XLA-compiled cached greedy decoding spends its time, ours vs keras-hub (TensorFlow, CPU).

Builds the same two decoding loops as `benchmarks/decode.py` (random weights, fixed number of tokens), compiles
each with `tf.function(jit_compile=True)`, and records XLA's own per-op trace events
(`XLA_FLAGS=--xla_cpu_enable_xprof_traceme=true`) with `tf.profiler` over `--repeats` runs. Prints, per decoding
step, the time in matmuls (XLA `MatMul`/`dot` ops, listed by size) and in every other XLA op (fusions, copies,
cache updates), and the ops that took longest.

The profiler's per-op events slow small ops down: compare the two columns, not the absolute times with
`benchmarks/decode.py`.

Usage:
    python benchmarks/decode_profile.py                    # batch 8, the issue's dimensions
    python benchmarks/decode_profile.py --batch-size 1 --top 15
"""

import argparse
import collections
import glob
import os
import re
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_enable_xprof_traceme=true").strip()

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import decode  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_transformer import build_transformer  # noqa: E402

MATMUL = re.compile(r"(MatMul|dot)(\.\d+)?$")
HLO_NAME = re.compile(r"MatMul(\.\d+)?|[a-z][a-z0-9_]*(\.\d+)?")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32, help="tokens generated per row (fixed, no early stop)")
    parser.add_argument("--source-length", type=int, default=24)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--num-heads", type=int, default=8)
    parser.add_argument("--d-ff", type=int, default=1024)
    parser.add_argument("--num-layers", type=int, default=3, help="encoder and decoder blocks each")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--repeats", type=int, default=5, help="profiled runs of each loop")
    parser.add_argument("--top", type=int, default=10, help="longest ops to list per implementation")
    return parser.parse_args(argv)


def op_times(logdir):
    """`{op name: (total picoseconds, count)}` of the XLA op events, and the total of `decode` events."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)[0], "rb") as f:
        space.ParseFromString(f.read())
    ops, decode_ps = collections.defaultdict(lambda: [0, 0]), 0
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if name == "decode":
                    decode_ps += event.duration_ps
                # XLA op events carry plain HLO names (`fusion.3`, `dot.12`; `MatMul.7` for a dot from a TF MatMul),
                # unlike the runtime's own events (`ThunkExecutor::Execute`, `EagerExecute`, ...).
                elif HLO_NAME.fullmatch(name):
                    ops[name][0] += event.duration_ps
                    ops[name][1] += 1
    return ops, decode_ps


def profile(fn, ids, repeats):
    import tensorflow as tf

    for _ in range(2):
        fn(ids).numpy()  # trace, compile, warm up
    with tempfile.TemporaryDirectory(prefix="decode_profile_") as logdir:  # the trace is read, then removed
        tf.profiler.experimental.start(logdir)
        for _ in range(repeats):
            fn(ids).numpy()
        tf.profiler.experimental.stop()
        return op_times(logdir)


def main(argv=None):
    args = parse_args(argv)
    if keras.backend.backend() != "tensorflow":
        raise SystemExit("decode_profile.py reads TensorFlow profiler traces: run it with KERAS_BACKEND=tensorflow.")
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    model = build_transformer(
        args.vocab_size, args.vocab_size, num_layers=args.num_layers, d_model=args.d_model,
        num_heads=args.num_heads, d_ff=args.d_ff, dropout=0.0, max_length=max(256, args.tokens),
    )
    hub_args = decode.parse_args([
        "--tokens", str(args.tokens), "--source-length", str(args.source_length), "--d-model", str(args.d_model),
        "--num-heads", str(args.num_heads), "--d-ff", str(args.d_ff), "--num-layers", str(args.num_layers),
        "--vocab-size", str(args.vocab_size),
    ])
    loops = {
        "ours (cached)": decode.ours_cached(model, args.tokens),
        "keras-hub (cached)": decode.keras_hub_cached(hub_args),
    }
    ids = np.random.default_rng(0).integers(3, args.vocab_size, (args.batch_size, args.source_length)).astype("int32")
    steps = args.repeats * args.tokens
    results = {name: profile(tf.function(fn, jit_compile=True), ids, args.repeats) for name, fn in loops.items()}

    def per_step(ps):
        return ps / 1e6 / steps  # microseconds per decoding step

    names = list(results)
    print(f"batch {args.batch_size}, {args.num_layers}+{args.num_layers} layers, d_model {args.d_model}, "
          f"{args.num_heads} heads, d_ff {args.d_ff}, vocab {args.vocab_size}; us per decoding step under the "
          f"profiler ({args.repeats} runs x {args.tokens} steps)")
    header = f"{'':<34}" + "".join(f"{name:>22}" for name in names)
    print(header)
    print("-" * len(header))
    rows = collections.OrderedDict()
    for name, (ops, decode_ps) in results.items():
        matmuls = {op: value for op, value in ops.items() if MATMUL.match(op)}
        others = {op: value for op, value in ops.items() if not MATMUL.match(op)}
        rows.setdefault("whole step (decode)", {})[name] = f"{per_step(decode_ps):.0f}"
        rows.setdefault("matmuls", {})[name] = (
            f"{per_step(sum(v[0] for v in matmuls.values())):.0f} "
            f"({sum(v[1] for v in matmuls.values()) / steps:.0f} ops)"
        )
        rows.setdefault("  largest matmul", {})[name] = f"{per_step(max(v[0] for v in matmuls.values())):.0f}"
        rows.setdefault("other XLA ops", {})[name] = (
            f"{per_step(sum(v[0] for v in others.values())):.0f} ({sum(v[1] for v in others.values()) / steps:.0f} ops)"
        )
    for label, values in rows.items():
        print(f"{label:<34}" + "".join(f"{values.get(name, '-'):>22}" for name in names))
    for name, (ops, _) in results.items():
        print(f"\n{name}: the {args.top} longest ops (us per step)")
        for op, (ps, count) in sorted(ops.items(), key=lambda item: -item[1][0])[: args.top]:
            print(f"  {per_step(ps):8.1f}  {op} (x{count / steps:.2f} per step)")


if __name__ == "__main__":
    main()
