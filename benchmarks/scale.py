"""Training from a corpus of millions of pairs: memory, time to the first step, input pipeline vs model speed.

Generates a large parallel corpus in a temporary directory by recombining Multi30k sentences (each pair is a
Multi30k pair drawn at random or, with `--joined F`, for a fraction F two joined on both sides), written as gzip
shards, then runs the same short training (the path
`keras-transformer train` takes: one scanning pass, the vocabulary from a bounded sample, the streamed epoch
dataset) on Multi30k itself and on the large corpus, each in a fresh process, and prints a table:

* peak RSS of each training process (the large run must stay under 2.5 GB and within 25% of the Multi30k run:
  memory must not grow with the corpus);
* seconds from the command's start to the end of the first training step (goal: under 2 minutes);
* the batches per second the model trains, and the batches per second the input pipeline alone delivers
  (reading, shuffling, tokenizing, bucketing; timed once training has ended, on the run's tokenizers): goal >= 3x.

    python benchmarks/scale.py --data DATA_DIR                      # 5M pairs, 300 steps (~10 min here)
    python benchmarks/scale.py --data synthetic --pairs 3000 --steps 3   # smoke test, no corpus needed

Nothing is written outside the temporary directory (`--workdir` to choose it, `--keep` to keep it).
"""

import time

START = time.time()  # "the start of the command" for the time-to-first-step measurement

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import print_table  # noqa: E402

DEFAULT_DATA = os.path.join(HERE, "..", "..", "shared", "data", "multi30k")
RESULT = "RESULT "


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=DEFAULT_DATA,
                   help="Multi30k directory (train.de.gz, train.en.gz), or 'synthetic' for the built-in corpus")
    p.add_argument("--pairs", type=int, default=5_000_000, help="pairs of the generated corpus")
    p.add_argument("--shards", type=int, default=8, help="gzip shards per side")
    p.add_argument("--joined", type=float, default=0.0,
                   help="fraction of generated pairs that join two Multi30k pairs (longer sentences cost memory "
                        "in activations, not in the corpus: 0 keeps Multi30k's length distribution)")
    p.add_argument("--steps", type=int, default=300, help="training steps of each run")
    p.add_argument("--pipeline-batches", type=int, default=300, help="batches timed in the pipeline-only run")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--num-layers", type=int, default=2)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--num-heads", type=int, default=4)
    p.add_argument("--d-ff", type=int, default=1024)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--jit-compile", action=argparse.BooleanOptionalAction, default=True,
                   help="XLA-compile the train step (the trainer's default; --no-jit-compile as "
                        "examples/multi30k.yaml)")
    p.add_argument("--workdir", help="where to generate the corpus and runs (default: a new temporary directory)")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    # Internal: one measured process.
    p.add_argument("--child", choices=["train"], help=argparse.SUPPRESS)
    p.add_argument("--src", nargs="+", help=argparse.SUPPRESS)
    p.add_argument("--tgt", nargs="+", help=argparse.SUPPRESS)
    p.add_argument("--output", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def model_settings(args):
    return dict(num_layers=args.num_layers, d_model=args.d_model, num_heads=args.num_heads, d_ff=args.d_ff,
                max_length=args.max_length)


def training_settings(args):
    return dict(batch_size=args.batch_size, vocab_size=args.vocab_size, epochs=1, steps_per_epoch=args.steps,
                average_last=1, jit_compile=args.jit_compile)


# ----------------------------------------------------------------------------------------------- the corpus


def base_pairs(data):
    """The sentences to recombine: Multi30k's training pairs, or the built-in synthetic corpus."""
    if data == "synthetic":
        from keras_transformer.data.synthetic import make_synthetic_splits

        train, _ = make_synthetic_splits(2000, 0, seed=1)
        return list(train.sources), list(train.targets)
    sides = []
    for name in ("train.de.gz", "train.en.gz"):
        path = os.path.join(data, name)
        if not os.path.exists(path):
            sys.exit(f"scale.py: {path} not found; pass --data DIR (a Multi30k directory: train.de.gz, train.en.gz) "
                     "or --data synthetic")
        with gzip.open(path, "rt", encoding="utf-8") as f:
            sides.append([line.strip() for line in f])
    return sides[0], sides[1]


def generate_corpus(sources, targets, pairs, shards, directory, joined=0.0, seed=0):
    """Writes `pairs` pairs as `shards` gzip shards per side; returns the (src, tgt) shard lists.

    Each pair is a base pair drawn at random or, for a `joined` fraction, two base pairs joined on both sides.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    count = len(sources)
    src_files, tgt_files = [], []
    per_shard = -(-pairs // shards)
    written = 0
    for shard in range(shards):
        n = min(per_shard, pairs - written)
        first, second = rng.integers(0, count, n), rng.integers(0, count, n)
        join = rng.random(n) < joined
        src_path = os.path.join(directory, f"train.de.{shard:03d}.gz")
        tgt_path = os.path.join(directory, f"train.en.{shard:03d}.gz")
        src_lines = [sources[a] + " " + sources[b] if j else sources[a] for a, b, j in zip(first, second, join)]
        with gzip.open(src_path, "wt", encoding="utf-8", compresslevel=1) as f:
            f.write("\n".join(src_lines) + "\n")
        del src_lines
        tgt_lines = [targets[a] + " " + targets[b] if j else targets[a] for a, b, j in zip(first, second, join)]
        with gzip.open(tgt_path, "wt", encoding="utf-8", compresslevel=1) as f:
            f.write("\n".join(tgt_lines) + "\n")
        del tgt_lines
        src_files.append(src_path)
        tgt_files.append(tgt_path)
        written += n
    return src_files, tgt_files


# -------------------------------------------------------------------------------------- measured processes


def child_train(args):
    """Trains as `keras-transformer train` does, then times the input pipeline alone on the run's tokenizers; prints
    first-step time, step rate, peak RSS (taken before the pipeline's timing) and the pipeline's rate as JSON."""
    import keras

    from keras_transformer.data.streaming import scan_corpus
    from keras_transformer.runs.config import TrainingConfig
    from keras_transformer.training.trainer import train

    class StepClock(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.ends = []

        def on_train_batch_end(self, batch, logs=None):
            self.ends.append(time.time())

    config = TrainingConfig(**training_settings(args))
    scanned_at = time.time()
    corpus = scan_corpus(args.src, args.tgt, sample_size=config.vocab_sample, seed=config.seed)
    scan_seconds = time.time() - scanned_at
    clock = StepClock()
    kept, shards = corpus.kept, len(corpus.src_files)
    handed = [corpus]
    del corpus  # as the CLI does: train() holds the only reference, and frees the vocabulary sample once used
    train(handed.pop(), args.output, model_settings=model_settings(args), training_settings=training_settings(args),
          verbose=0, callbacks=[clock])
    ends = clock.ends
    warm = min(10, len(ends) - 2) if len(ends) > 2 else 0  # leave out the steps that compile
    rate = (len(ends) - 1 - warm) / (ends[-1] - ends[warm]) if len(ends) - 1 > warm else float("nan")
    result = {"pairs": kept, "shards": shards, "scan_seconds": scan_seconds, "first_step_seconds": ends[0] - START,
              "steps": len(ends), "model_batches_per_second": rate,
              "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    result["pipeline_batches_per_second"] = pipeline_rate(args)
    print(RESULT + json.dumps(result), flush=True)


def pipeline_rate(args):
    """The training input pipeline alone (the run's tokenizers, the same batching): batches per second."""
    from keras_transformer.data.pipeline import DataPosition
    from keras_transformer.data.pipeline import make_epoch_dataset
    from keras_transformer.data.streaming import file_pairs
    from keras_transformer.data.streaming import resolve_files
    from keras_transformer.runs.config import TrainingConfig
    from keras_transformer.runs.run import load_tokenizers

    config = TrainingConfig(**training_settings(args))
    src_files, tgt_files = resolve_files(args.src), resolve_files(args.tgt, "--tgt")
    source, target = load_tokenizers(args.output)
    dataset = make_epoch_dataset(
        lambda seed: file_pairs(src_files, tgt_files, seed=seed), source, target, position=DataPosition(),
        seed=config.seed, shuffle_buffer=config.shuffle_buffer, batch_size=config.batch_size,
        max_length=args.max_length, same_length=config.jit_compile, drop_remainder=True,
    ).repeat()
    iterator = iter(dataset)
    warmup = 10  # the first batches also fill the shuffle buffer, as the model's first steps wait for it
    for _ in range(warmup):
        next(iterator)
    start = time.time()
    for _ in range(args.pipeline_batches):
        next(iterator)
    return args.pipeline_batches / (time.time() - start)


def run_child(kind, args, src, tgt, output):
    command = [sys.executable, os.path.abspath(__file__), "--child", kind, "--src", *src, "--tgt", *tgt,
               "--output", output]
    for name in ("steps", "pipeline_batches", "batch_size", "num_layers", "d_model", "num_heads", "d_ff",
                 "max_length", "vocab_size"):
        command += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    command.append("--jit-compile" if args.jit_compile else "--no-jit-compile")
    result = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    lines = [line for line in result.stdout.splitlines() if line.startswith(RESULT)]
    if result.returncode != 0 or not lines:
        sys.exit(f"scale.py: the {kind} run on {os.path.basename(src[0])} failed:\n{result.stderr[-3000:]}")
    return json.loads(lines[-1][len(RESULT):])


def main(argv=None):
    args = parse_args(argv)
    if args.child == "train":
        return child_train(args)

    workdir = args.workdir or tempfile.mkdtemp(prefix="keras-transformer-scale-")
    os.makedirs(workdir, exist_ok=True)
    try:
        sources, targets = base_pairs(args.data)
        base_dir = os.path.join(workdir, "base")
        os.makedirs(base_dir, exist_ok=True)
        base = generate_corpus(sources, targets, len(sources), 1, base_dir) if args.data == "synthetic" else (
            [os.path.join(args.data, "train.de.gz")], [os.path.join(args.data, "train.en.gz")])
        big_dir = os.path.join(workdir, "big")
        os.makedirs(big_dir, exist_ok=True)
        print(f"Generating {args.pairs:,} pairs in {args.shards} gzip shards per side under {big_dir} ...",
              flush=True)
        started = time.time()
        big = generate_corpus(sources, targets, args.pairs, args.shards, big_dir, joined=args.joined)
        size = sum(os.path.getsize(p) for p in big[0] + big[1])
        print(f"  {time.time() - started:.0f} s, {size / 2**20:,.0f} MiB compressed", flush=True)

        rows, results = [], {}
        base_name = "synthetic" if args.data == "synthetic" else "Multi30k"
        for name, (src, tgt) in ((base_name, base), (f"{args.pairs:,} pairs", big)):
            print(f"Training {args.steps} steps on {name} ...", flush=True)
            output = os.path.join(workdir, f"run-{len(rows)}")
            trained = results[name] = run_child("train", args, src, tgt, output)
            ratio = trained["pipeline_batches_per_second"] / trained["model_batches_per_second"]
            rows.append([name, f"{trained['pairs']:,}", trained["shards"], f"{trained['scan_seconds']:.1f}",
                         f"{trained['first_step_seconds']:.1f}", f"{trained['peak_rss_bytes'] / 1e9:.2f}",
                         f"{trained['model_batches_per_second']:.2f}", f"{trained['pipeline_batches_per_second']:.1f}",
                         f"{ratio:.1f}x"])
        print()
        print(f"Model: {args.num_layers}+{args.num_layers} layers, d_model {args.d_model}, d_ff {args.d_ff}, "
              f"batch {args.batch_size}, max length {args.max_length}, "
              f"XLA {'on' if args.jit_compile else 'off'}; backend "
              f"{os.environ.get('KERAS_BACKEND', 'tensorflow')}")
        print_table(["corpus", "pairs kept", "shards", "scan s", "first step s", "peak RSS GB", "model batch/s",
                     "pipeline batch/s", "pipeline/model"], rows)
        small, large = (results[r[0]] for r in rows)
        rss_ratio = large["peak_rss_bytes"] / small["peak_rss_bytes"]
        pipe_ratio = large["pipeline_batches_per_second"] / large["model_batches_per_second"]
        print()
        print(f"peak RSS, large corpus: {large['peak_rss_bytes'] / 1e9:.2f} GB (goal < 2.5 GB: "
              f"{'met' if large['peak_rss_bytes'] < 2.5e9 else 'NOT met'}); {rss_ratio:.2f}x the {rows[0][0]} run "
              f"(goal <= 1.25x: {'met' if rss_ratio <= 1.25 else 'NOT met'})")
        print(f"first step, large corpus: {large['first_step_seconds']:.0f} s after the command started (goal < 120 s: "
              f"{'met' if large['first_step_seconds'] < 120 else 'NOT met'})")
        print(f"input pipeline, large corpus: {pipe_ratio:.1f}x the batches/s the model trains (goal >= 3x: "
              f"{'met' if pipe_ratio >= 3 else 'NOT met'})")
    finally:
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
