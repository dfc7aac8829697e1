"""Benchmark: size and per-sentence latency of an exported translator (SavedModel and TFLite) against Python.

Exports a run directory, then translates held-out synthetic sentences one per call (batch 1, greedy) with each
format, after a warm-up pass over the same sentences, and prints a table of the
median and 90th-percentile latency per sentence, plus sizes. The translations of the three must be equal.

Formats:
- python: `keras_transformer.decoding.Translator` (its default: the decoding loop XLA-compiled once per padded
  source shape; the tokenizers run outside the compiled function).
- saved_model: `tf.saved_model.load(DIR).signatures["serving_default"]`, the whole pipeline in one graph.
- tflite: `InterpreterWithCustomOps` with tensorflow-text's ops (`--threads` interpreter threads).

Usage:
    python benchmarks/export_latency.py RUN_DIR                # e.g. the output of `keras-transformer quickstart`
    python benchmarks/export_latency.py RUN_DIR --sentences 50 --threads 2
"""

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

from keras_transformer.data.synthetic import make_synthetic_splits  # noqa: E402
from keras_transformer.decoding.translator import Translator  # noqa: E402
from keras_transformer.export import TranslatorModule  # noqa: E402
from keras_transformer.export import export_saved_model  # noqa: E402
from keras_transformer.export import export_tflite  # noqa: E402
from keras_transformer.export.saved_model import directory_size  # noqa: E402
from keras_transformer.runs.run import load_run  # noqa: E402
from keras_transformer.translators import TFLiteTranslator  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="Size and per-sentence latency of the exported translators.")
    parser.add_argument("run_dir", help="run directory written by `train` or `quickstart`")
    parser.add_argument("--sentences", type=int, default=30, help="held-out synthetic sentences to translate")
    parser.add_argument("--threads", type=int, default=None, help="TFLite interpreter threads")
    parser.add_argument("--output", default=None, help="directory for the exports (default: a temporary one)")
    parser.add_argument("--python-eager", action="store_true",
                        help="run the Python Translator eagerly (jit_compile=False) instead of XLA-compiled")
    return parser.parse_args(argv)


def time_per_sentence(translate, texts):
    for text in texts:  # warm-up: traces and compiles every shape once
        translate(text)
    times, outputs = [], []
    for text in texts:
        start = time.perf_counter()
        outputs.append(translate(text))
        times.append(time.perf_counter() - start)
    times.sort()
    return statistics.median(times), times[int(0.9 * (len(times) - 1))], outputs


def main(argv=None):
    args = parse_args(argv)
    output = args.output or tempfile.mkdtemp(prefix="export_latency_")
    run = load_run(args.run_dir)
    module = TranslatorModule.from_run(run)
    saved_model = export_saved_model(module, os.path.join(output, "saved_model"))
    tflite = export_tflite(module, os.path.join(output, "model.tflite"))
    _, heldout = make_synthetic_splits(200, args.sentences, seed=123)
    texts = list(heldout.sources)

    python = Translator(run.model, run.source_tokenizer, run.target_tokenizer, jit_compile=not args.python_eager)
    serving = tf.saved_model.load(saved_model).signatures["serving_default"]
    lite = TFLiteTranslator(tflite, num_threads=args.threads)
    methods = {
        "python" + (" (eager)" if args.python_eager else " (XLA)"): lambda t: python.translate([t])[0],
        "saved_model": lambda t: serving(text=tf.constant([t]))["translation"].numpy()[0].decode("utf-8"),
        "tflite": lambda t: lite.translate([t])[0],
    }
    sizes = {"saved_model": directory_size(saved_model), "tflite": os.path.getsize(tflite)}
    results = {}
    print(f"{len(texts)} sentences, batch 1, greedy, model {run.model.count_params():,} parameters "
          f"({run.model.count_params() * 4 / 2**20:.2f} MiB of float32 weights)")
    print(f"{'format':<16} {'size MiB':>9} {'median ms':>10} {'p90 ms':>8}")
    for name, translate in methods.items():
        median, p90, outputs = time_per_sentence(translate, texts)
        results[name] = outputs
        size = f"{sizes[name] / 2**20:.2f}" if name in sizes else "-"
        print(f"{name:<16} {size:>9} {median * 1e3:>10.1f} {p90 * 1e3:>8.1f}")
    first, *others = results.values()
    same = all(other == first for other in others)
    print(f"translations equal across formats: {same}; exports in {output}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
