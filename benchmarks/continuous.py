"""Benchmark: continuous batching (`SlotEngine`) against batch-at-a-time decoding and CTranslate2, offline.

The same sentences, the same weights, greedy decoding (or beam search, `--beam-size N`), each
engine in a process of its own (`--threads` CPU threads), after a warm-up pass over the same sentences (so no
compilation is timed):

* `static`: sentences sorted by length, decoded batch at a time by the XLA-compiled whole loop (a batch runs until
  its longest row ends): `Translator.translate(batch, beam_size=--beam-size)` per batch of `--slots` sentences
  (given more, `translate` itself decodes in a `SlotEngine`);
* `engine-kN`: `SlotEngine` with `--slots` slots advancing N tokens per compiled call, sentences submitted in
  length order: a row that ends leaves at once and the next sentence takes its slot (beam search: a
  `BeamSlotEngine`, `--slots` sentences of N beams each, the run's length penalty);
* `ct2-mkl0` / `ct2-mkl1`: the run exported with `keras-transformer export RUN --ctranslate2 DIR`, translated by
  `ctranslate2.Translator.translate_batch(max_batch_size=--slots)` with `CT2_USE_MKL=0` (oneDNN) and `=1` (MKL).

Columns: wall seconds for all sentences (median of `--repeats`), sentences/s, the ratio to the faster CTranslate2
row, and how many translations equal `static`'s (the engine decodes the same tokens; CTranslate2 its own
arithmetic). The busy-slot share says how full the engine's slots were per step.

Usage:
    python benchmarks/continuous.py RUN --src test_2016_flickr.de.gz          # a Multi30k-size run
    python benchmarks/continuous.py RUN --src S --sentences 200 --engines static engine-k1 --repeats 1  # quicker
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import print_table  # noqa: E402

ENGINES = ("static", "engine-k1", "engine-k4", "engine-k8", "ct2-mkl0", "ct2-mkl1")
RESULT = "RESULT "


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--src", required=True, help="source sentences, one per line (.gz accepted)")
    parser.add_argument("--sentences", type=int, default=1000, help="how many of --src to translate")
    parser.add_argument("--slots", type=int, default=32, help="slots of the engine; batch size of the others")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of every engine")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per engine (the median is shown)")
    parser.add_argument("--engines", nargs="+", default=None, choices=ENGINES,
                        help="default: all of them")
    parser.add_argument("--beam-size", type=int, default=1, help="1: greedy decoding; more: beam search")
    parser.add_argument("--work", help="directory for the CTranslate2 export (default: a temporary one)")
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--engine", help=argparse.SUPPRESS)  # internal: run one engine in this process
    args = parser.parse_args(argv)
    args.engines = args.engines or list(ENGINES)
    return args


def read_lines(path, count):
    from keras_transformer.data.corpus import read_lines as read

    return read(path)[:count]


def make_translate(engine, args, ct2_dir):
    """`translate(texts) -> (translations, busy-slot share or None)` for one engine."""
    if engine.startswith("ct2"):
        from keras_transformer.translators.ctranslate2 import CTranslate2Translator

        translator = CTranslate2Translator(ct2_dir, intra_threads=args.threads)
        return lambda texts: (translator.translate(texts, beam_size=args.beam_size, batch_size=args.slots), None)
    from keras_transformer.translators import load_translator

    translator = load_translator(args.run_dir)
    if engine == "static":  # one batch per call: `translate` decodes more than a batch in a SlotEngine
        def static(texts):
            order = sorted(range(len(texts)), key=lambda i: len(texts[i].encode("utf-8")))
            outputs = [""] * len(texts)
            for begin in range(0, len(order), args.slots):
                chunk = order[begin: begin + args.slots]
                for i, text in zip(chunk, translator.translate([texts[i] for i in chunk], beam_size=args.beam_size,
                                                               batch_size=args.slots)):
                    outputs[i] = text
            return outputs, None

        return static
    import numpy as np

    from keras_transformer.decoding import BeamSampler
    from keras_transformer.decoding import BeamSlotEngine
    from keras_transformer.decoding import SlotEngine
    from keras_transformer.decoding.translator import pad_source_rows
    from keras_transformer.decoding.translator import tokenize_rows

    target = translator.target_tokenizer
    sampler = translator.decoding_sampler(args.beam_size)
    kind = BeamSlotEngine if isinstance(sampler, BeamSampler) else SlotEngine
    slot_engine = kind(translator.model, translator.max_length, target.start_id, target.end_id, slots=args.slots,
                       sampler=sampler, steps_per_call=int(engine.split("-k")[1]))
    slot_engine.warm_up()

    def translate(texts):
        rows = tokenize_rows(translator.source_tokenizer, texts)
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        sources = pad_source_rows([rows[i] for i in order], translator.source_tokenizer, translator.parts.max_length)
        busy = []
        requests = [slot_engine.submit(source) for source in sources]
        while not slot_engine.idle:
            slot_engine.step()
            busy.append(slot_engine.live)
        tokens = np.zeros((len(texts), translator.max_length), "int32")
        for i, request in zip(order, requests):
            tokens[i, : len(request.tokens)] = request.tokens
        outputs = [t.decode("utf-8", errors="replace") for t in target.detokenize(tokens).numpy()]
        return outputs, None if not busy else float(np.mean(busy)) / args.slots

    return translate


def run_engine(args):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    engine, ct2_dir = args.engine.split("=", 1)
    texts = read_lines(args.src, args.sentences)
    translate = make_translate(engine, args, ct2_dir)
    outputs, _ = translate(texts)  # warm-up: compiles every shape these sentences need
    times = []
    for _ in range(args.repeats):
        begin = time.perf_counter()
        outputs, busy = translate(texts)
        times.append(time.perf_counter() - begin)
    print(RESULT + json.dumps({"engine": engine, "seconds": statistics.median(times), "busy": busy,
                               "outputs": outputs}), flush=True)


def spawn(engine, args, ct2_dir):
    env = dict(os.environ)
    if engine.startswith("ct2"):
        env["CT2_USE_MKL"] = engine[-1]
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    command = [sys.executable, os.path.abspath(__file__), args.run_dir, "--src", args.src, "--sentences",
               str(args.sentences), "--slots", str(args.slots), "--threads", str(args.threads), "--repeats",
               str(args.repeats), "--beam-size", str(args.beam_size), "--engine", f"{engine}={ct2_dir}"]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    for line in done.stdout.splitlines():
        if line.startswith(RESULT):
            return json.loads(line[len(RESULT):])
    raise RuntimeError(f"{engine} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def describe_cpu():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except Exception:
        return "unknown CPU"


def main(argv=None):
    args = parse_args(argv)
    if args.engine:
        return run_engine(args)
    work = args.work or tempfile.mkdtemp(prefix="continuous-")
    ct2_dir = os.path.join(work, "ct2")
    if any(e.startswith("ct2") for e in args.engines) and not os.path.isdir(ct2_dir):
        subprocess.run([sys.executable, "-m", "keras_transformer.cli", "export", args.run_dir, "--ctranslate2",
                        ct2_dir], check=True, capture_output=True)
    results = {engine: spawn(engine, args, ct2_dir) for engine in args.engines}
    ct2 = [r["seconds"] for e, r in results.items() if e.startswith("ct2")]
    best_ct2 = min(ct2) if ct2 else None
    reference = results.get("static", {}).get("outputs")
    count = len(next(iter(results.values()))["outputs"])
    rows = []
    for engine, result in results.items():
        same = "-" if reference is None else f"{sum(a == b for a, b in zip(result['outputs'], reference))}/{count}"
        rows.append([engine, f"{result['seconds']:.2f}", f"{count / result['seconds']:.1f}",
                     "-" if best_ct2 is None else f"{result['seconds'] / best_ct2:.2f}x",
                     "-" if result["busy"] is None else f"{100 * result['busy']:.0f}%", same])
    decoding = "greedy" if args.beam_size == 1 else f"beam {args.beam_size}"
    print(f"{count} sentences, {decoding}, {args.slots} slots / batch size, {args.threads} threads; {describe_cpu()}")
    print_table(["engine", "seconds", "sentences/s", "x best CT2", "busy slots", "same as static"], rows)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({e: {k: v for k, v in r.items() if k != "outputs"} for e, r in results.items()}, f, indent=1)


if __name__ == "__main__":
    main()
