"""Benchmark: keras-hub's `generate()` on `TransformerSeq2SeqLM` against the package's `Translator`, and int8.

One run directory is loaded once; every engine decodes with its weights in this process:

- anchor: `Translator(run.model, run.source_tokenizer, run.target_tokenizer)` (what `load_translator(RUN)`
  returns), `translate(texts, beam_size=1)` and `translate(texts, beam_size=4)`: the package's compiled decoders;
- `TransformerSeq2SeqLM.from_run(RUN)`, `task.generate(texts)` (keras-hub's preprocess -> compiled `generate_step`
  -> postprocess), with the package's samplers (`GreedySampler()`, the default, and `BeamSampler(num_beams=4)`:
  the package's KV-cached decoders inside `generate_step`) and with keras-hub's (`compile(sampler="greedy")`,
  `keras_hub.samplers.BeamSampler(num_beams=4)`: keras-hub's sampling loop over one cached decoder step per token).
  The tasks share one backbone (the run's model's weights); on TensorFlow the task's generate function is
  XLA-compiled on every device, as the anchor's decoders are.

The sentences (`--sentences`, cycled up to a multiple of every batch size) are split into batches of each
`--batch-sizes` (1 and 8), one call per batch. Every engine runs one untimed pass first (it compiles every shape it
meets), then the engines take turns, pass by pass, `--repeats` times, so that other load on the machine weighs on all
alike; a row shows the median pass. Tokens are counted the same way for every engine: the target tokenizer's subword
tokens of each output text (the end token not counted). `x anchor` is the row's pass time over the anchor's of the
same decoding and batch (1.00 = as fast; above 1 slower), `= anchor` the fraction of outputs equal to the anchor's.
A second table splits the default `generate()` call into keras-hub's three stages (preprocess, the compiled generate
function, postprocess).

int8: a fresh `TransformerSeq2SeqLM.from_run(RUN)` is quantized with `task.quantize("int8")`: the
bytes of its backbone's weights (size * itemsize, summed) and of `save_to_preset`'s `model.weights.h5` before and
after, ms per token at batch 8 against the float32 task (default sampler), and the fraction of
`--agreement-sentences` sentences whose greedy output is the same under int8 as under float32.

Goals: `generate()` with the package's samplers no slower than the anchor (x anchor <= 1.0) at every batch size;
int8 weights at most half the float32 bytes.

Usage:
    python benchmarks/keras_hub_api.py                              # saved_models/quickstart, date sentences
    python benchmarks/keras_hub_api.py runs/multi30k --src test_2016_flickr.de.gz --json keras_hub_api.json
    python benchmarks/keras_hub_api.py RUN --sentences 8 --repeats 1 --agreement-sentences 16   # quicker
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import print_table  # noqa: E402
from pretrained import cpu_model  # noqa: E402
from serve import read_sentences  # noqa: E402

DEFAULT_RUN = os.path.join("saved_models", "quickstart")
GOAL_RATIO = 1.0  # generate() with the package's samplers / anchor
GOAL_INT8_BYTES = 0.5  # int8 bytes / float32 bytes


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", metavar="RUN", nargs="?", default=None,
                        help=f"a run directory written by `train` (default: {DEFAULT_RUN})")
    parser.add_argument("--src", help="source sentences, one per line (.gz accepted; default: generated date phrases)")
    parser.add_argument("--sentences", type=int, default=16, help="sentences of a timed pass (cycled up to a "
                                                                  "multiple of every batch size)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per engine (the median is shown)")
    parser.add_argument("--agreement-sentences", type=int, default=100,
                        help="sentences compared between int8 and float32 greedy outputs")
    parser.add_argument("--int8-batch", type=int, default=8, help="batch size of the int8 timing")
    parser.add_argument("--skip-beam", action="store_true")
    parser.add_argument("--skip-int8", action="store_true")
    parser.add_argument("--threads", type=int, default=None, help="TensorFlow intra-op threads (default: all)")
    parser.add_argument("--json", help="also write every number here")
    args = parser.parse_args(argv)
    if args.run is None:
        if not os.path.exists(DEFAULT_RUN):
            parser.error(f"no RUN given and {DEFAULT_RUN} does not exist: run `keras-transformer quickstart` first, "
                         "or pass a run directory")
        args.run = DEFAULT_RUN
    if not os.path.isdir(args.run):
        parser.error(f"{args.run}: not a directory")
    if min(args.batch_sizes) < 1 or args.sentences < 1 or args.repeats < 1 or args.beam_size < 2:
        parser.error("--batch-sizes, --sentences and --repeats must be >= 1, --beam-size >= 2")
    if args.agreement_sentences < 1 or args.int8_batch < 1:
        parser.error("--agreement-sentences and --int8-batch must be >= 1")
    return args


# ----------------------------------------------------------------------------------------------------- engines


def make_engines(run, args):
    """`[(decoding, name, translate)]`, the anchor of each decoding first; `translate(texts)` -> strings. Also the
    default task (the float32 side of the int8 comparison)."""
    import keras_hub

    from keras_transformer import TransformerSeq2SeqLM
    from keras_transformer.decoding.samplers import BeamSampler
    from keras_transformer.decoding.samplers import GreedySampler
    from keras_transformer.decoding.translator import Translator

    anchor = Translator(run.model, run.source_tokenizer, run.target_tokenizer, decoding=run.decoding)
    default = TransformerSeq2SeqLM.from_run(run, sampler=GreedySampler())

    def task(sampler):
        return TransformerSeq2SeqLM(default.backbone, default.preprocessor, sampler=sampler).generate

    beam = args.beam_size
    engines = [("greedy", "anchor: Translator.translate", lambda texts: anchor.translate(texts, beam_size=1)),
               ("greedy", "generate(): ours GreedySampler (default)", default.generate),
               ("greedy", "generate(): keras-hub \"greedy\"", task("greedy"))]
    if not args.skip_beam:
        engines += [(f"beam {beam}", f"anchor: translate(beam_size={beam})",
                     lambda texts: anchor.translate(texts, beam_size=beam)),
                    (f"beam {beam}", f"generate(): ours BeamSampler({beam})", task(BeamSampler(num_beams=beam))),
                    (f"beam {beam}", f"generate(): keras-hub BeamSampler({beam})",
                     task(keras_hub.samplers.BeamSampler(num_beams=beam)))]
    return engines, default


def chunks_of(texts, batch):
    """`texts` in consecutive batches of `batch` (the caller makes the count a multiple)."""
    return [texts[i: i + batch] for i in range(0, len(texts), batch)]


def run_pass(translate, chunks):
    """(seconds, outputs) of one call per chunk; outputs as Python strings."""
    outputs, seconds = [], 0.0
    for chunk in chunks:
        start = time.perf_counter()
        out = translate(chunk)
        seconds += time.perf_counter() - start
        outputs += [o if isinstance(o, str) else o.decode("utf-8") for o in out]
    return seconds, outputs


def per_token(seconds, tokens):
    """Milliseconds per token, `None` when no token was generated."""
    return 1000 * seconds / tokens if tokens else None


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def count_tokens(tokenizer, texts):
    """Subword tokens of `texts` under the target tokenizer (no start or end token)."""
    from keras_transformer.decoding.translator import tokenize_rows

    return sum(len(row) for row in tokenize_rows(tokenizer, [t for t in texts if t.strip()]))


def time_engines(engines, chunks, repeats):
    """`{name: (seconds of each timed pass, outputs of the warm-up pass)}`, the engines in turn each pass."""
    warm, warmup = {}, {}
    for _, name, translate in engines:
        warmup[name], warm[name] = run_pass(translate, chunks)
    times = {name: [] for _, name, _ in engines}
    for _ in range(repeats):
        for _, name, translate in engines:
            times[name].append(run_pass(translate, chunks)[0])
    return {name: (times[name], warm[name], warmup[name]) for name in times}


def speed_rows(engines, texts, args, target_tokenizer):
    rows = []
    for batch in args.batch_sizes:
        chunks = chunks_of(texts, batch)
        started = time.perf_counter()
        measured = time_engines(engines, chunks, args.repeats)
        print(f"  batch {batch}: {len(chunks)} calls per pass, measured in {time.perf_counter() - started:.0f} s",
              flush=True)
        anchors = {}
        for decoding, name, _ in engines:
            runs, outputs, warmup = measured[name]
            seconds = statistics.median(runs)
            tokens = count_tokens(target_tokenizer, outputs)
            anchor = anchors.setdefault(decoding, (seconds, outputs))
            rows.append({"decoding": decoding, "engine": name, "batch": batch, "seconds": seconds,
                         "best_seconds": min(runs), "warmup_seconds": warmup, "sentences": len(texts),
                         "tokens": tokens,
                         "ms_per_token": per_token(seconds, tokens), "sentences_per_s": len(texts) / seconds,
                         "x_anchor": seconds / anchor[0],
                         "agreement": sum(a == b for a, b in zip(outputs, anchor[1])) / len(texts)})
    return rows


def stage_rows(task, texts, args):
    """Median ms per call of keras-hub's three stages of the default `generate()`, per batch size."""
    from keras import ops

    generate = task.make_generate_function()
    stop = [task.preprocessor.tokenizer.end_token_id]
    rows = []
    for batch in args.batch_sizes:
        stages = {"preprocess": [], "generate_function": [], "postprocess": []}
        for _ in range(args.repeats + 1):  # the first round warms up
            for chunk in chunks_of(texts, batch):
                start = time.perf_counter()
                inputs = task.preprocessor.generate_preprocess(chunk)
                middle = time.perf_counter()
                outputs = generate(inputs, stop_token_ids=stop)
                ops.convert_to_numpy(outputs["decoder_token_ids"])
                end = time.perf_counter()
                task.preprocessor.generate_postprocess(outputs)
                for name, seconds in zip(stages, (middle - start, end - middle, time.perf_counter() - end)):
                    stages[name].append(seconds)
        calls = len(texts) // batch
        rows.append({"batch": batch, **{f"{name}_ms": 1000 * statistics.median(values[calls:])
                                        for name, values in stages.items()}})
    return rows


# -------------------------------------------------------------------------------------------------------- int8


def weight_bytes(model):
    """`{dtype: bytes}` of `model.weights` (size * itemsize)."""
    import numpy as np

    out = {}
    for weight in model.weights:
        dtype = np.dtype(weight.dtype)
        out[dtype.name] = out.get(dtype.name, 0) + int(np.prod(weight.shape)) * dtype.itemsize
    return out


def preset_bytes(task, directory):
    return os.path.getsize(os.path.join(task.save_to_preset(directory), "model.weights.h5"))


def int8_report(run, float_task, texts, agreement_texts, args, target_tokenizer):
    from keras_transformer import TransformerSeq2SeqLM
    from keras_transformer.decoding.samplers import GreedySampler

    task = TransformerSeq2SeqLM.from_run(run, sampler=GreedySampler())
    with tempfile.TemporaryDirectory(prefix="kt-keras-hub-api-") as work:
        before, h5_before = weight_bytes(task.backbone), preset_bytes(task, os.path.join(work, "float32"))
        task.quantize("int8")
        after, h5_after = weight_bytes(task.backbone), preset_bytes(task, os.path.join(work, "int8"))
    batch = args.int8_batch
    engines = [("int8", "float32", float_task.generate), ("int8", "int8", task.generate)]
    measured = time_engines(engines, chunks_of(texts, batch), args.repeats)
    timing = {}
    for _, name, _ in engines:
        runs, outputs, _ = measured[name]
        tokens = count_tokens(target_tokenizer, outputs)
        timing[name] = {"seconds": statistics.median(runs), "tokens": tokens,
                        "ms_per_token": per_token(statistics.median(runs), tokens)}
    chunks = chunks_of(cycle(agreement_texts, batch), batch)
    float_out, int8_out = (run_pass(engine, chunks)[1][: len(agreement_texts)] for _, _, engine in engines)
    same = sum(a == b for a, b in zip(float_out, int8_out))
    return {"bytes_float32": sum(before.values()), "bytes_int8": sum(after.values()),
            "bytes_ratio": sum(after.values()) / sum(before.values()), "h5_bytes_ratio": h5_after / h5_before,
            "ms_ratio": ratio(timing["int8"]["ms_per_token"], timing["float32"]["ms_per_token"]),
            "bytes_by_dtype_float32": before, "bytes_by_dtype_int8": after, "h5_bytes_float32": h5_before,
            "h5_bytes_int8": h5_after,
            "batch": batch, "timing": timing, "agreement": same / len(agreement_texts),
            "agreement_sentences": len(agreement_texts), "same": same}


# ------------------------------------------------------------------------------------------------------ report


def cycle(texts, multiple, count=None):
    """`texts` (the first `count`, cycled when fewer) up to a multiple of `multiple`."""
    count = count or len(texts)
    count = -(-count // multiple) * multiple
    return [texts[i % len(texts)] for i in range(count)]


def lcm(values):
    import math

    out = 1
    for value in values:
        out = out * value // math.gcd(out, value)
    return out


def print_report(rows, stages, int8, args):
    print_table(["decoding", "engine", "batch", "ms/token", "sentences/s", "tokens", "x anchor", "= anchor"],
                [[r["decoding"], r["engine"], r["batch"], fmt(r['ms_per_token'], '.3f'), f"{r['sentences_per_s']:.1f}",
                  r["tokens"], f"{r['x_anchor']:.2f}", f"{r['agreement']:.2f}"] for r in rows])
    print("\nwhere the default generate() call's time goes (median ms per call):")
    print_table(["batch", "preprocess", "generate function", "postprocess"],
                [[s["batch"], f"{s['preprocess_ms']:.2f}", f"{s['generate_function_ms']:.2f}",
                  f"{s['postprocess_ms']:.2f}"] for s in stages])
    goals, lines = {}, []
    ours = [r for r in rows if r["engine"].startswith("generate(): ours") and not r["engine"].endswith("XLA")]
    worst = max(r["x_anchor"] for r in ours)
    goals["generate_vs_anchor"] = worst <= GOAL_RATIO
    lines.append(f"goal: generate() with the package's samplers no slower than the anchor (x anchor <= "
                 f"{GOAL_RATIO:.1f}): " + ", ".join(f"{r['decoding']} b{r['batch']} {r['x_anchor']:.2f}x"
                                                     for r in ours)
                 + f" ({'met' if goals['generate_vs_anchor'] else 'NOT met'})")
    if int8 is not None:
        print(f"\nint8 (task.quantize(\"int8\")) against float32, greedy (default sampler), batch {int8['batch']}:")
        t = int8["timing"]
        mib = 1024 * 1024
        print_table(["", "weight MiB", "model.weights.h5 MiB", "ms/token", "tokens"],
                    [[name, f"{int8['bytes_' + name] / mib:.2f}", f"{int8['h5_bytes_' + name] / mib:.2f}",
                      fmt(t[name]['ms_per_token'], '.3f'), t[name]["tokens"]] for name in ("float32", "int8")])
        by_dtype = ", ".join(f"{k} {v / mib:.2f} MiB" for k, v in sorted(int8["bytes_by_dtype_int8"].items()))
        print(f"int8 weights by dtype: {by_dtype}; int8/float32 ms per token {fmt(int8['ms_ratio'], '.2f')}x")
        print(f"int8 greedy output = float32's: {int8['same']}/{int8['agreement_sentences']} "
              f"({int8['agreement']:.2f})")
        goals["int8_half_bytes"] = int8["bytes_ratio"] <= GOAL_INT8_BYTES
        lines.append(f"goal: int8 weights at most {GOAL_INT8_BYTES:g} of float32's: {int8['bytes_ratio']:.2f} in "
                     f"memory, {int8['h5_bytes_ratio']:.2f} in model.weights.h5 "
                     f"({'met' if goals['int8_half_bytes'] else 'NOT met'})")
    print()
    for line in lines:
        print(line)
    return goals, lines


def main(argv=None):
    args = parse_args(argv)
    import keras
    import keras_hub

    from keras_transformer.runs.run import load_run

    if args.threads:
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    pool = read_sentences(args.src, count=max(args.sentences, args.agreement_sentences))
    texts = cycle(pool[: args.sentences], lcm(args.batch_sizes + [args.int8_batch]))
    agreement_texts = pool[: args.agreement_sentences]
    run = load_run(args.run)
    engines, default = make_engines(run, args)
    cpu = f"{cpu_model()}, {os.cpu_count()} cores"
    print(f"{args.run}: {len(texts)} sentences per pass, {args.repeats} timed passes (median) after one untimed "
          f"pass per engine; backend {keras.backend.backend()}, keras {keras.__version__}, keras-hub "
          f"{keras_hub.__version__}; CPU: {cpu}", flush=True)
    started = time.perf_counter()
    rows = speed_rows(engines, texts, args, run.target_tokenizer)
    stages = stage_rows(default, texts, args)
    int8 = None
    if not args.skip_int8:
        print(f"  int8: quantizing a fresh task, {len(agreement_texts)} sentences compared ...", flush=True)
        int8 = int8_report(run, default, texts, agreement_texts, args, run.target_tokenizer)
    print(f"\nmeasured in {time.perf_counter() - started:.0f} s\n")
    goals, lines = print_report(rows, stages, int8, args)
    result = {"config": {**{k: v for k, v in vars(args).items() if k != "json"}, "cpu": cpu,
                         "backend": keras.backend.backend(), "keras": keras.__version__,
                         "keras_hub": keras_hub.__version__,
                         "timed_sentences": len(texts)},
              "rows": rows, "stages": stages, "int8": int8, "goals": goals, "goal_lines": lines}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
