"""Benchmark: an NLLB-200-size checkpoint imported, exported and timed against transformers and CTranslate2.

One random-weight NLLB-style checkpoint in the Hugging Face layout (`M2M100ForConditionalGeneration`; the tokenizer
is a BPE SentencePiece model trained on generated text in four languages, made up to a real vocabulary's size with
filler pieces that the model computes and BPE never reaches) goes through what a user does with a real one:

- import: `keras-transformer import` in a process of its own, whose peak resident memory is reported against the
  float32 weights;
- parity: the imported model's logits against transformers' on the same inputs (teacher-forced), max |difference|
  (both models in a process of their own; so are the exports: the timing process holds only the engines it times);
- export: a SavedModel per decoding (greedy, beam 4), CTranslate2 float32 and int8 (`export --ctranslate2`), with
  their sizes; TFLite with int8 weights (token ids in and out, its tokenizer beside it; converted from the greedy
  SavedModel's module), its size or its failure, and where it converts, its greedy time at batch 1 against
  CTranslate2 int8's;
- speed: ms per sentence at batch 1 and 8, greedy and beam 4, into three target languages mixed in each batch: our
  SavedModel (raw strings in, `target_language` per row), transformers' `generate(forced_bos_token_id=...)` in torch,
  and CTranslate2 float32 and int8 (the anchor: CTranslate2's own converter of the checkpoint, tokenized with
  `sentencepiece` and `target_prefix` as its NLLB guide does). The engines take turns pass by pass, so other load
  weighs on all alike; each runs `--threads` threads. Our CTranslate2 export's greedy translations are compared with
  the anchor's.

Every engine decodes at most `--max-new-tokens` tokens, the forced language code included (random weights seldom
end a sentence: the cap keeps the work equal), length penalty 1 as transformers applies it. The greedy outputs are
compared line by line with transformers'.

Goals (printed PASS/FAIL with the measured gap): logits within 1e-4; import peak RSS at most 2x the weights; our
SavedModel at most CTranslate2 fp32's time at batch 1; a quantized TFLite file within 1.5x of CTranslate2 int8.

Usage:
    python benchmarks/multilingual.py           # NLLB-200-distilled-600M's size: 12+12 layers, d 1024, vocab 256,206
    CT2_USE_MKL=1 python benchmarks/multilingual.py   # CTranslate2 on MKL instead of oneDNN; keep the faster
    python benchmarks/multilingual.py --layers 1 --d-model 32 --heads 2 --ffn 64 --vocab 400 --sentences 4 \\
        --max-new-tokens 6                      # a quick check that everything runs
"""

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CT2_USE_MKL", "0")  # CTranslate2's oneDNN backend: on AMD CPUs about twice as fast as MKL
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # tests.importers writes the checkpoint
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from common import print_table  # noqa: E402
from pretrained import cpu_model  # noqa: E402
from pretrained import set_threads  # noqa: E402
from pretrained import timed_pass  # noqa: E402

LANGUAGES = ("eng_Latn", "deu_Latn", "fra_Latn", "spa_Latn")
TARGETS = LANGUAGES[1:]
BEAM = 4
DECODINGS = ((1, "greedy"), (BEAM, f"beam {BEAM}"))
# The CTranslate2 rows are its own conversion of the checkpoint.
ENGINE_NAMES = {"ours": "ours (SavedModel, XLA)", "transformers": "transformers (torch)",
                "ct2": f"CTranslate2 fp32 (CT2_USE_MKL={os.environ['CT2_USE_MKL']})",
                "ct2_int8": f"CTranslate2 int8 (CT2_USE_MKL={os.environ['CT2_USE_MKL']})"}
LOGITS_GOAL = 1e-4
RSS_GOAL = 2.0


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=12, help="encoder layers, and as many decoder layers")
    parser.add_argument("--d-model", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--ffn", type=int, default=4096, help="feed-forward width")
    parser.add_argument("--vocab", type=int, default=256206, help="tokens in the vocabulary (NLLB-200 has 256,206)")
    parser.add_argument("--sentences", type=int, default=8, help="test sentences, timed at each batch size")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--max-new-tokens", type=int, default=16, help="most output tokens, for every engine")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of every engine")
    parser.add_argument("--repeats", type=int, default=1, help="timed passes per engine; the fastest counts")
    parser.add_argument("--json", help="also write the numbers here")
    return parser.parse_args(argv)


def write_checkpoint(directory, args):
    """The random-weight checkpoint; returns `(directory, transformers tokenizer, float32 weight bytes)`."""
    import torch
    import transformers

    from tests.importers.m2m_100_files import write_nllb_tokenizer_files

    probe = write_nllb_tokenizer_files(os.path.join(directory, "probe"), LANGUAGES)
    shutil.rmtree(os.path.join(directory, "probe"))
    checkpoint = os.path.join(directory, "checkpoint")
    tokenizer = write_nllb_tokenizer_files(checkpoint, LANGUAGES, filler_pieces=max(0, args.vocab - len(probe)))
    config = transformers.M2M100Config(
        vocab_size=len(tokenizer), d_model=args.d_model, encoder_layers=args.layers, decoder_layers=args.layers,
        encoder_attention_heads=args.heads, decoder_attention_heads=args.heads, encoder_ffn_dim=args.ffn,
        decoder_ffn_dim=args.ffn, max_position_embeddings=1024, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0, scale_embedding=True, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        decoder_start_token_id=2)
    torch.manual_seed(0)
    model = transformers.M2M100ForConditionalGeneration(config).eval()
    model.save_pretrained(checkpoint)
    weights = sum(p.numel() for p in model.parameters()) * 4
    del model  # each step loads what it needs: the main process holds only the engines it times
    gc.collect()
    return checkpoint, tokenizer, weights


def load_reference(checkpoint):
    """transformers' model of the checkpoint, in evaluation mode."""
    import transformers

    return transformers.M2M100ForConditionalGeneration.from_pretrained(checkpoint).eval()


def in_own_process(call, **kwargs):
    """Runs `call` (`"module.function"`) with `kwargs` in a Python process of its own, so that its memory is returned
    when it ends; returns `(seconds, peak RSS in bytes)`."""
    code = ("import importlib, json, resource, sys; module, name = sys.argv[1].rsplit('.', 1); "
            "getattr(importlib.import_module(module), name)(**json.loads(sys.argv[2])); "
            "print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    begin = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "benchmarks")]))
    process = subprocess.run([sys.executable, "-W", "ignore", "-c", code, call, json.dumps(kwargs)],
                             capture_output=True, text=True, cwd=ROOT, env=env)
    if process.returncode != 0:
        raise RuntimeError(f"{call} failed:\n{process.stderr[-3000:]}")
    return time.perf_counter() - begin, int(process.stdout.split("PEAK")[-1].split()[0]) * 1024


def export_ours_to_ctranslate2(run_dir, work):
    """Our CTranslate2 export of the run, float32 and int8, into `work/ct2_float32` and `work/ct2_int8` (run by
    `in_own_process`: the run is loaded once for both)."""
    from keras_transformer.export.ctranslate2_model import export_ctranslate2
    from keras_transformer.runs.run import load_run

    run = load_run(run_dir)
    for quantization in (None, "int8"):
        export_ctranslate2(run, os.path.join(work, f"ct2_{quantization or 'float32'}"), quantization=quantization)


def convert_with_ctranslate2(checkpoint, output_dir):
    """CTranslate2's own converter of a Hugging Face checkpoint (run by `in_own_process`)."""
    import ctranslate2

    ctranslate2.converters.TransformersConverter(checkpoint).convert(output_dir)


def logits_difference(run_dir, checkpoint, texts, result):
    """Writes to `result` (JSON) max |our logits - transformers' logits| over the real positions of teacher-forced
    decoder inputs, and the largest |logit| (so that a tiny difference is not that of tiny logits). Run by
    `in_own_process`: both models in memory at once."""
    import numpy as np
    import torch
    import transformers
    from keras import ops

    from keras_transformer import load_run

    run, model = load_run(run_dir), load_reference(checkpoint)
    tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint)
    tokenizer.src_lang = "eng_Latn"
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    labels = tokenizer(text_target=texts[::-1], return_tensors="pt", padding=True)["input_ids"].numpy()
    decoder = np.concatenate([np.full((len(texts), 1), 2), labels[:, :-1]], axis=1)
    decoder[:, 1] = tokenizer.convert_tokens_to_ids("fra_Latn")
    with torch.no_grad():
        theirs = model(**batch, decoder_input_ids=torch.tensor(decoder)).logits.numpy()
    ours_ids = run.source_tokenizer.from_original_ids
    decoder_ours = ours_ids(decoder)
    decoder_ours[:, 0] = run.target_tokenizer.start_id
    logits = ops.convert_to_numpy(run.model({"encoder_inputs": ours_ids(batch["input_ids"].numpy()),
                                             "decoder_inputs": decoder_ours}))
    expected = theirs[..., run.target_tokenizer.original_ids]
    expected[..., run.target_tokenizer.start_id] = theirs[..., 1]  # [START]'s logit is the padding logit
    real = decoder != 1
    with open(result, "w", encoding="utf-8") as f:
        json.dump({"max_difference": float(np.abs(logits - expected)[real].max()),
                   "largest_logit": float(np.abs(expected).max())}, f)


def size_of(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def export_all(run_dir, checkpoint, work, args):
    """Every artifact, each written by a process of its own before any is loaded here: SavedModels (greedy, with the
    int8 TFLite file converted from the same module, then beam), our CTranslate2 export (float32, int8) and
    CTranslate2's own conversion (the anchor). Returns their sizes in bytes (the TFLite entry: its size, or why it
    failed)."""
    sizes = {}
    common = dict(run_dir=run_dir, max_length=args.max_new_tokens, length_penalty=1.0,
                  length_penalty_rule="transformers", force_end=False, verbose=0)
    paths = {beam: os.path.join(work, f"saved_model_{name.replace(' ', '')}") for beam, name in DECODINGS}
    print("  SavedModel, greedy, and TFLite, int8 weights ...", flush=True)
    tflite = _export_with_tflite(paths[1], os.path.join(work, "nllb.tflite"), common)
    for beam, name in DECODINGS:
        path = paths[beam]
        if not os.path.isdir(path):  # beam search, or a TFLite file refused before the greedy SavedModel was written
            print(f"  SavedModel, {name} ...", flush=True)
            in_own_process("keras_transformer.export_run", saved_model=path, beam_size=beam, **common)
        sizes[f"SavedModel ({name})"] = size_of(path)
    # Our export: its sizes, and its translations checked against the anchor's.
    print("  CTranslate2 float32 and int8 (export --ctranslate2) ...", flush=True)
    in_own_process("multilingual.export_ours_to_ctranslate2", run_dir=run_dir, work=work)
    for quantization in ("float32", "int8"):
        sizes[f"CTranslate2 {quantization} (ours)"] = size_of(os.path.join(work, f"ct2_{quantization}"))
    print("  CTranslate2's own converter ...", flush=True)
    in_own_process("multilingual.convert_with_ctranslate2", checkpoint=checkpoint,
                   output_dir=os.path.join(work, "ct2_theirs"))
    sizes["TFLite (int8 weights)"] = tflite
    return sizes


def _export_with_tflite(saved_model, tflite, common):
    """The greedy SavedModel and the int8 TFLite file of the same module, in one process; the TFLite file's size,
    or why it failed (the SavedModel is written first, unless the file is refused before any work)."""
    try:
        in_own_process("keras_transformer.export_run", saved_model=saved_model, tflite=tflite,
                       tflite_quantize="dynamic_range", beam_size=1, **common)
        return size_of(tflite)
    except RuntimeError as error:
        lines = [line for line in str(error).splitlines() if line.strip()]
        return "failed: " + (lines[-1].split(": ", 1)[-1] if lines else "?")


def load_engines(checkpoint, tokenizer, work, args):
    """`{engine: translate(texts, beam) -> (translations, None)}`, each row's target language from
    `state["targets"]` (set per call), and `state`."""
    import ctranslate2
    import sentencepiece
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops the SavedModel uses)
    import torch

    engines, state = {}, {"targets": None}
    signatures = {beam: tf.saved_model.load(os.path.join(work, f"saved_model_{name.replace(' ', '')}"))
                  .signatures["serving_default"] for beam, name in DECODINGS}

    def ours(texts, beam):
        out = signatures[beam](text=tf.constant(texts), target_language=tf.constant(state["targets"]))
        return [t.decode("utf-8") for t in out["translation"].numpy()], None

    model = load_reference(checkpoint)

    def transformers_generate(texts, beam):
        tokenizer.src_lang = "eng_Latn"
        outputs = [None] * len(texts)
        for target in sorted(set(state["targets"])):  # generate forces one language per call
            rows = [i for i, t in enumerate(state["targets"]) if t == target]
            with torch.inference_mode():
                batch = tokenizer([texts[i] for i in rows], return_tensors="pt", padding=True)
                out = model.generate(**batch, num_beams=beam, do_sample=False, max_new_tokens=args.max_new_tokens,
                                     forced_bos_token_id=tokenizer.convert_tokens_to_ids(target))
            for i, text in zip(rows, tokenizer.batch_decode(out, skip_special_tokens=True)):
                outputs[i] = text
        return outputs, None

    engines.update(ours=ours, transformers=transformers_generate)
    # The anchor: CTranslate2's own conversion of the checkpoint, tokenized with sentencepiece as its guide does.
    pieces = sentencepiece.SentencePieceProcessor(model_file=os.path.join(checkpoint, "sentencepiece.bpe.model"))
    special = set(LANGUAGES) | {"</s>", "<s>", "<pad>", "<unk>"}
    for compute_type, engine in (("float32", "ct2"), ("int8", "ct2_int8")):
        translator = ctranslate2.Translator(os.path.join(work, "ct2_theirs"), device="cpu",
                                            compute_type=compute_type, intra_threads=args.threads, inter_threads=1)

        def ct2(texts, beam, translator=translator):
            sources = [["eng_Latn"] + row + ["</s>"] for row in pieces.encode(texts, out_type=str)]
            found = translator.translate_batch(sources, target_prefix=[[code] for code in state["targets"]],
                                               beam_size=beam, max_decoding_length=args.max_new_tokens,
                                               min_decoding_length=0, max_batch_size=len(texts))
            return [pieces.decode([t for t in r.hypotheses[0] if t not in special]) for r in found], None

        engines[engine] = ct2
    return engines, state


def time_tflite(path, engines, state, texts, args):
    """ms per sentence at batch 1, greedy: the int8 TFLite file and CTranslate2 int8, taking turns; and how many
    of their translations agree."""
    from keras_transformer.translators.tflite import TFLiteTranslator

    translator = TFLiteTranslator(path, num_threads=args.threads)

    def tflite(texts, beam):
        return translator.translate(texts, source_language="eng_Latn", target_language=state["targets"]), None

    target_of = {text: TARGETS[i % 3] for i, text in enumerate(texts)}

    def call(translate):
        def one(chunk, beam):
            state["targets"] = [target_of[chunk[0]]]
            return translate(chunk, beam)
        return one

    chunks = [[text] for text in texts]
    best = {}
    for name, translate in (("tflite", tflite), ("ct2_int8", engines["ct2_int8"])):
        call(translate)(chunks[0], 1)  # warm-up
    for _ in range(args.repeats):
        for name, translate in (("tflite", tflite), ("ct2_int8", engines["ct2_int8"])):
            seconds, translations, _ = timed_pass(call(translate), chunks, 1)
            if name not in best or seconds < best[name][0]:
                best[name] = (seconds, translations)
    agree = sum(a == b for a, b in zip(best["tflite"][1], best["ct2_int8"][1]))
    return {name: 1000 * seconds / len(texts) for name, (seconds, _) in best.items()}, agree


def main(argv=None):
    args = parse_args(argv)
    set_threads(args.threads)
    from tests.importers.m2m_100_checkpoint import sentences

    cpu = cpu_model()
    texts = sentences(args.sentences, seed=7)
    work = tempfile.mkdtemp(prefix="kt-multilingual-")
    results = {"cpu": cpu, "threads": args.threads}
    try:
        print(f"Writing a random-weight NLLB-style checkpoint ({args.layers}+{args.layers} layers, d_model "
              f"{args.d_model}, {args.heads} heads, ffn {args.ffn}, vocabulary ~{args.vocab:,}) ...", flush=True)
        checkpoint, tokenizer, weights = write_checkpoint(work, args)
        print("Importing it (keras-transformer import, its own process) ...", flush=True)
        run_dir = os.path.join(work, "run")
        seconds, peak = in_own_process("keras_transformer.import_checkpoint", source=checkpoint, output_dir=run_dir,
                                       verbose=0)
        results["import"] = {"seconds": seconds, "peak_rss": peak, "weights": weights, "ratio": peak / weights}
        print("Comparing logits with transformers' (its own process) ...", flush=True)
        in_own_process("multilingual.logits_difference", run_dir=run_dir, checkpoint=checkpoint, texts=texts[:4],
                       result=os.path.join(work, "logits.json"))
        with open(os.path.join(work, "logits.json"), encoding="utf-8") as f:
            results["logits"] = json.load(f)
        difference, largest = results["logits"]["max_difference"], results["logits"]["largest_logit"]
        print("Exporting it (each artifact in its own process) ...", flush=True)
        sizes = export_all(run_dir, checkpoint, work, args)
        sizes["checkpoint (model.safetensors)"] = size_of(os.path.join(checkpoint, "model.safetensors"))
        results["sizes"] = sizes
        print("Loading the engines ...", flush=True)
        engines, state = load_engines(checkpoint, tokenizer, work, args)
        rows, agree = [], {}
        results["load"] = [os.getloadavg()[0]]
        for batch in args.batches:
            chunks = [texts[i: i + batch] for i in range(0, len(texts), batch)]
            for beam, decoding in DECODINGS:
                best = {}
                for chunk in chunks:  # every shape of ours compiles on its first call; the others warm up
                    state["targets"] = [TARGETS[i % 3] for i in range(len(chunk))]
                    for engine in engines:
                        engines[engine](chunk, beam) if engine == "ours" or chunk is chunks[0] else None
                for _ in range(args.repeats):
                    for engine, translate in engines.items():
                        def call(chunk, beam, translate=translate):
                            state["targets"] = [TARGETS[i % 3] for i in range(len(chunk))]
                            return translate(chunk, beam)

                        result = timed_pass(call, chunks, beam)
                        if engine not in best or result[0] < best[engine][0]:
                            best[engine] = result
                for engine, (seconds, translations, _) in best.items():
                    rows.append({"engine": engine, "batch": batch, "decoding": decoding, "beam": beam,
                                 "ms_per_sentence": 1000 * seconds / len(texts)})
                    agree[(engine, batch, beam)] = sum(a == b for a, b in zip(translations, best["transformers"][1]))
                print(f"  batch {batch}, {decoding}: " + ", ".join(
                    f"{r['engine']} {r['ms_per_sentence']:.0f} ms" for r in rows[-len(engines):]), flush=True)
        results["rows"] = rows
        if isinstance(sizes["TFLite (int8 weights)"], int):
            print("  TFLite int8 and CTranslate2 int8, batch 1, greedy ...", flush=True)
            results["tflite"] = time_tflite(os.path.join(work, "nllb.tflite"), engines, state, texts, args)
        results["load"].append(os.getloadavg()[0])
        state["targets"] = [TARGETS[i % 3] for i in range(len(texts))]
        anchor = engines["ct2"](texts, 1)[0]
        engines.clear()  # their memory, before our CTranslate2 export loads
        gc.collect()
        from keras_transformer.translators.ctranslate2 import CTranslate2Translator

        ours_ct2 = CTranslate2Translator(os.path.join(work, "ct2_float32"), intra_threads=args.threads).translate(
            texts, beam_size=1, max_length=args.max_new_tokens, source_language="eng_Latn",
            target_language=state["targets"])
        results["ctranslate2_export_agrees"] = sum(a == b for a, b in zip(ours_ct2, anchor))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    ms = {(r["engine"], r["batch"], r["beam"]): r["ms_per_sentence"] for r in rows}
    print(f"\nCPU: {cpu}; {args.threads} threads per engine; load average {results['load'][0]:.2f} before the timed "
          f"passes, {results['load'][1]:.2f} after")
    print(f"Model: NLLB-style M2M-100, {args.layers}+{args.layers} layers, d_model {args.d_model}, {args.heads} "
          f"heads, ffn {args.ffn}, vocabulary {len(tokenizer):,}, random weights ({weights / 2**30:.2f} GiB float32); "
          f"{len(texts)} sentences into {', '.join(TARGETS)}, at most {args.max_new_tokens} new tokens\n")
    imported = results["import"]
    print(f"Import: {imported['seconds']:.0f} s, peak RSS {imported['peak_rss'] / 2**30:.2f} GiB = "
          f"{imported['ratio']:.2f}x the float32 weights")
    print(f"Logits: max |ours - transformers| = {difference:.2e} (largest |logit| {largest:.1f})\n")
    print(f"Our CTranslate2 export, greedy: {results['ctranslate2_export_agrees']}/{len(texts)} translations equal "
          "to CTranslate2's own conversion\n")
    print_table(["artifact", "size"], [[name, f"{value / 2**20:,.1f} MiB" if isinstance(value, int) else value]
                                       for name, value in sizes.items()])
    print()
    print_table(["engine", "batch", "decoding", "ms/sentence", "x CT2 fp32", "= transformers' text"],
                [[ENGINE_NAMES[r["engine"]], r["batch"], r["decoding"], f"{r['ms_per_sentence']:.1f}",
                  f"{r['ms_per_sentence'] / ms[('ct2', r['batch'], r['beam'])]:.2f}",
                  f"{agree[(r['engine'], r['batch'], r['beam'])]}/{len(texts)}"] for r in rows])

    goals = [{"goal": f"logits within {LOGITS_GOAL:g} of transformers'", "passed": difference <= LOGITS_GOAL,
              "measured": f"{difference:.2e}"},
             {"goal": f"import peak RSS <= {RSS_GOAL:g}x the weights", "passed": imported["ratio"] <= RSS_GOAL,
              "measured": f"{imported['ratio']:.2f}x"}]
    if 1 in args.batches:
        for beam, decoding in DECODINGS:
            ratio = ms[("ours", 1, beam)] / ms[("ct2", 1, beam)]
            goals.append({"goal": f"our SavedModel <= CTranslate2 fp32, batch 1, {decoding}", "passed": ratio <= 1.0,
                          "measured": f"{ratio:.2f}x CTranslate2's time"})
    tflite = sizes["TFLite (int8 weights)"]
    if "tflite" in results:
        (tflite_ms, agreed) = results["tflite"]
        ratio = tflite_ms["tflite"] / tflite_ms["ct2_int8"]
        print(f"\nTFLite int8 (greedy, batch 1): {tflite_ms['tflite']:.1f} ms/sentence, CTranslate2 int8 "
              f"{tflite_ms['ct2_int8']:.1f} ms ({ratio:.2f}x); {agreed}/{len(texts)} translations equal")
        goals.append({"goal": "int8 TFLite within 1.5x of CTranslate2 int8 (greedy, batch 1)", "passed": ratio <= 1.5,
                      "measured": f"{ratio:.2f}x CTranslate2 int8's time"})
    else:
        goals.append({"goal": "int8 TFLite within 1.5x of CTranslate2 int8", "passed": False, "measured": tflite})
    print()
    for goal in goals:
        print(f"  {'PASS' if goal['passed'] else 'FAIL'}  {goal['goal']}: {goal['measured']}")
    results["goals"] = goals
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
