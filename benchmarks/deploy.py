"""Benchmark: every way we ship a trained model, and CTranslate2 on the same weights, side by side.

One run directory is exported as a SavedModel, TFLite (fp32 / fp16 / dynamic-range int8) and CTranslate2 (fp32 /
int8). Each engine then runs in a process of its own (so that its peak RSS is its own): it translates `--sentences`
source sentences at each batch size, greedy and beam 4, after a warm-up pass over the same batches, and scores
`--bleu-sentences` of the `--src`/`--ref` pairs with sacreBLEU. Printed columns: ms per decoding step (batch wall
time / the batch's longest output in tokens, median over batches), sentences/s, peak RSS of the process, artifact
size, BLEU, and the ratio of ms/step to CTranslate2 in the same run (fp32 rows to CTranslate2 fp32, int8 rows to
CTranslate2 int8).

Usage (Multi30k: a run from `examples/multi30k.yaml`, sentences and references from the Multi30k directory
DATA_DIR; the validation set, so that speed work never looks at test2016, which docs/quality.md keeps for frozen
recipes):
    python benchmarks/deploy.py runs/multi30k --src val.de.gz --ref val.en.gz
    python benchmarks/deploy.py RUN --src S --ref R --batches 1 8 --beams 1 --sentences 32   # quicker

RUN may also be an ensemble directory (`keras-transformer ensemble`): python, saved_model, saved_model-graph and
tflite then decode all its members as one, while the CTranslate2 rows (the anchor) run member 0 alone, so "x CT2"
is the cost of deploying the ensemble against one model in CTranslate2. An ensemble of a run and its own copy
translates exactly as the run does (same outputs, same lengths): it isolates what the second member costs.

Engines: python (our `Translator`, XLA-compiled decoding loop), saved_model (the default export: decoding in one XLA
program; `serving_default` greedy, `translate_beam` beam 4), saved_model-graph (`export --no-jit-compile`: the same
signatures as plain graph ops), tflite-fp32/-fp16/-int8 (one sentence per interpreter call: batch rows are run in
turn), ct2-fp32/-int8 (`ctranslate2.Translator`, `--threads` intra threads).
"""

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import engine_rows  # noqa: E402
from common import print_rows  # noqa: E402

ENGINES = ("python", "saved_model", "saved_model-graph", "tflite-fp32", "tflite-fp16", "tflite-int8", "ct2-fp32",
           "ct2-int8")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--src", required=True, help="test source sentences (.gz accepted)")
    parser.add_argument("--ref", required=True, help="test references")
    parser.add_argument("--sentences", type=int, default=64, help="sentences timed per batch size")
    parser.add_argument("--bleu-sentences", type=int, default=1000, help="--src/--ref pairs scored for BLEU")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--work", help="directory for the exports (default: a temporary one)")
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--engine", help=argparse.SUPPRESS)  # internal: run one engine in this process
    return parser.parse_args(argv)


def read_lines(path):
    from keras_transformer.data.corpus import read_lines as read

    return read(path)


def member_directories(path):
    """The run directories behind RUN: itself, or an ensemble's members (nothing is loaded)."""
    from keras_transformer.runs.ensemble import is_ensemble_directory
    from keras_transformer.runs.ensemble import member_directories as members

    return members(path) if is_ensemble_directory(path) else [path]


def export_all(run_dir, work, engines):
    from keras_transformer.export import TranslatorModule
    from keras_transformer.export import export_saved_model
    from keras_transformer.export import export_tflite
    from keras_transformer.runs.ensemble import load_run_or_ensemble

    run = load_run_or_ensemble(run_dir)
    paths = {"python": run_dir}
    module = TranslatorModule.from_run(run)
    if "saved_model" in engines:
        paths["saved_model"] = export_saved_model(module, os.path.join(work, "saved_model"))
    if "saved_model-graph" in engines:
        graph = TranslatorModule.from_run(run, jit_compile=False)
        paths["saved_model-graph"] = export_saved_model(graph, os.path.join(work, "saved_model-graph"))
    for quantize, name in ((None, "tflite-fp32"), ("float16", "tflite-fp16"), ("dynamic_range", "tflite-int8")):
        if name in engines:
            paths[name] = export_tflite(module, os.path.join(work, f"{name}.tflite"), quantize=quantize)
    if any(e.startswith("ct2") for e in engines):
        from keras_transformer.export.ctranslate2_model import export_ctranslate2

        for quantization, name in ((None, "ct2-fp32"), ("int8", "ct2-int8")):
            if name in engines:  # CTranslate2 decodes one model: an ensemble's member 0
                member = run.members[0] if hasattr(run, "members") else run
                paths[name] = export_ctranslate2(member, os.path.join(work, name), quantization=quantization)
    return paths


def size_of(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _, names in os.walk(path):
        if "tokenizers" in root.split(os.sep):
            continue
        total += sum(os.path.getsize(os.path.join(root, n)) for n in names if not n.endswith(".keras")
                     or n == "model.keras")
    return total


def make_translate(engine, path, threads):
    """`translate(texts, beam) -> list of str` for one engine."""
    import numpy as np

    if engine == "python":
        from keras_transformer.decoding.translator import Translator
        from keras_transformer.runs.ensemble import load_run_or_ensemble

        run = load_run_or_ensemble(path)
        translator = Translator(run.parts if hasattr(run, "parts") else run.model, run.source_tokenizer,
                                run.target_tokenizer)
        return lambda texts, beam: translator.translate(texts, beam_size=beam, batch_size=len(texts))
    if engine.startswith("saved_model"):
        import tensorflow as tf
        import tensorflow_text  # noqa: F401

        loaded = tf.saved_model.load(path)
        signatures = {1: loaded.signatures["serving_default"], 4: loaded.signatures["translate_beam"]}

        def translate(texts, beam):
            out = signatures[beam](text=tf.constant(texts))["translation"].numpy()
            return [t.decode("utf-8") for t in out]

        return translate
    if engine.startswith("tflite"):
        import tensorflow_text
        from tensorflow.lite.python.interpreter import InterpreterWithCustomOps

        interpreter = InterpreterWithCustomOps(custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS,
                                               model_path=path, num_threads=threads)
        runners = {1: interpreter.get_signature_runner("serving_default")}

        def translate(texts, beam):
            if beam != 1:
                raise NotImplementedError("the TFLite model's signature decodes as exported (greedy here)")
            return [runners[1](text=np.array([t], dtype=object))["translation"][0].decode("utf-8") for t in texts]

        return translate
    from keras_transformer.translators.ctranslate2 import CTranslate2Translator

    translator = CTranslate2Translator(path, intra_threads=threads)
    return lambda texts, beam: translator.translate(texts, beam_size=beam, batch_size=len(texts))


def peak_rss_mb():
    """This process's peak resident memory (VmHWM: unlike `ru_maxrss`, not inherited from the parent over exec)."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_engine(args):
    """Runs one engine in this process and prints its rows as JSON."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    from keras_transformer.runs.run import load_tokenizers
    from keras_transformer.scoring import corpus_scores

    engine, path = args.engine.split("=", 1)
    sources = read_lines(args.src)
    references = read_lines(args.ref)
    translate = make_translate(engine, path, args.threads)
    _, target_tokenizer = load_tokenizers(member_directories(args.run_dir)[0])
    rows = []
    for beam in args.beams:
        if engine.startswith("tflite") and beam != 1:
            continue
        bleu_hyps = []
        for begin in range(0, min(args.bleu_sentences, len(sources)), 32):
            bleu_hyps += translate(sources[begin: min(begin + 32, args.bleu_sentences)], beam)
        bleu = corpus_scores(bleu_hyps, references[: len(bleu_hyps)])["bleu"]
        for batch in args.batches:
            texts = sources[: args.sentences]
            chunks = [texts[i: i + batch] for i in range(0, len(texts), batch)]
            for chunk in chunks:  # warm-up pass: XLA compiles each (batch, width) bucket once, buffers are allocated
                translate(chunk, beam)
            per_step, sentences, seconds = [], 0, 0.0
            for chunk in chunks:
                start = time.perf_counter()
                outputs = translate(chunk, beam)
                elapsed = time.perf_counter() - start
                steps = max(int(target_tokenizer.tokenize(outputs).row_lengths().numpy().max(initial=0)) + 1, 1)
                per_step.append(1000 * elapsed / steps)
                sentences += len(chunk)
                seconds += elapsed
            rows.append({"engine": engine, "beam": beam, "batch": batch, "ms_per_step": statistics.median(per_step),
                         "sentences_per_s": sentences / seconds, "bleu": bleu})
    peak = peak_rss_mb()
    for row in rows:
        row["peak_rss_mb"] = peak
    print_rows(rows)


def main(argv=None):
    args = parse_args(argv)
    if args.engine:
        return run_engine(args)
    work = args.work or tempfile.mkdtemp(prefix="kt-deploy-")
    print(f"Exporting {args.run_dir} into {work} ...", flush=True)
    paths = export_all(args.run_dir, work, args.engines)
    load = os.getloadavg()[0]
    rows = []
    for engine in args.engines:
        command = [sys.executable, os.path.abspath(__file__), args.run_dir, "--src", args.src, "--ref", args.ref,
                   "--sentences", str(args.sentences), "--bleu-sentences", str(args.bleu_sentences),
                   "--threads", str(args.threads), "--batches", *map(str, args.batches),
                   "--beams", *map(str, args.beams), "--engine", f"{engine}={paths[engine]}"]
        print(f"  {engine} ...", flush=True)
        rows_of_engine = engine_rows(command)
        if rows_of_engine is None:
            continue
        size = size_of(paths[engine]) if engine != "python" else sum(
            size_of(os.path.join(member, "model.keras")) for member in member_directories(args.run_dir))
        for row in rows_of_engine:
            row["size_mb"] = size / 2**20
        rows += rows_of_engine
    anchors = {(r["engine"], r["beam"], r["batch"]): r["ms_per_step"] for r in rows if r["engine"].startswith("ct2")}
    print(f"\nload average before the runs: {load:.2f}; {args.threads} threads; timed on {args.sentences} sentences, "
          f"BLEU on {args.bleu_sentences}")
    members = member_directories(args.run_dir)
    if len(members) > 1:
        print(f"an ensemble of {len(members)} runs: the ct2 rows decode member 0 ({members[0]}) alone")
    print(f"{'engine':17} {'beam':>4} {'batch':>5} {'ms/step':>8} {'sent/s':>7} {'RSS MB':>7} {'size MB':>7} "
          f"{'BLEU':>6} {'x CT2':>6}")
    for r in rows:
        anchor = "ct2-int8" if r["engine"].endswith("int8") else "ct2-fp32"
        ratio = r["ms_per_step"] / anchors[(anchor, r["beam"], r["batch"])] if (anchor, r["beam"], r["batch"]) in \
            anchors else float("nan")
        r["ratio_to_ct2"] = ratio
        print(f"{r['engine']:17} {r['beam']:>4} {r['batch']:>5} {r['ms_per_step']:8.2f} {r['sentences_per_s']:7.1f} "
              f"{r['peak_rss_mb']:7.0f} {r['size_mb']:7.1f} {r['bleu']:6.2f} {ratio:6.2f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
