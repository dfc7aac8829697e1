"""Benchmark: an imported OPUS-MT (Marian) model translated by our SavedModel, transformers and CTranslate2.

One random-weight Marian checkpoint in the Hugging Face layout (`tests.importers.marian_files`: SentencePiece
models trained on generated German/English words, `vocab.json` padded with filler tokens to the size of a real
OPUS-MT vocabulary) is decoded three ways, each as a user would run it:

- ours: `keras_transformer.importers.import_marian`, then `export_run` (decoding in one XLA program), called with
  raw strings: `serving_default` (greedy) and `translate_beam` (beam 4). Every batch shape is called once before
  the timed pass (its first call compiles).
- transformers: `MarianTokenizer` encode, `MarianMTModel.generate(num_beams=1 or 4, do_sample=False)` in torch on
  the CPU, `batch_decode(skip_special_tokens=True)`.
- CTranslate2: the checkpoint converted by `ctranslate2.converters.TransformersConverter` (float32),
  `translate_batch(beam_size=1 or 4)`, tokenized with `sentencepiece` (`source.spm`, plus `</s>` as Marian's
  tokenizer adds it) and detokenized with `target.spm`, as CTranslate2's docs do for OPUS-MT.

Every engine decodes at most `--max-new-tokens` tokens (random weights repeat themselves: a cap keeps the work
bounded and equal), with no minimum length (CTranslate2's default minimum of 1 is set to 0, and transformers'
forced end token at the cap is turned off, so that a capped output is the same `--max-new-tokens` tokens
everywhere) and length penalty 1 as transformers applies it (our export's `length_penalty_rule="transformers"`,
CTranslate2's default). ms/sentence is the wall time of a pass over all sentences divided by their count,
tokenization included, the fastest of `--repeats` passes; tokens/sentence counts the tokens each engine produced
(end token excluded; ours are counted by decoding the imported run in Python with the same settings), so that rows
compare equal work.
transformers and CTranslate2 run one untimed batch first. The engines take turns, pass by pass, for each batch size
and decoding, so that other load on the machine weighs on all three alike.

The checkpoint is made as OPUS-MT's are in two respects a random draw does not give: the `<pad>` embedding row is
zero (CTranslate2's converter relies on it: its decoder starts from a zero embedding), and the tokens that are not
pieces of `target.spm` (the fillers, the German pieces of the shared vocabulary, `<unk>`) get a logit bias far below
the others: every engine still computes all the logits, but outputs only what `target.spm` detokenizes as Marian's
tokenizer does, as a trained German-English model seldom outputs German pieces or its rarest tokens.

Goals (printed PASS/FAIL with the measured gap): ours at most CTranslate2 fp32's ms/sentence at batch 1 (greedy
and beam 4); ours at least 3x faster than transformers at batch 1 and 8. The greedy outputs of the three engines
are compared line by line: a speed comparison only counts on the same output.

Usage:
    python benchmarks/pretrained.py                       # base size: 6+6 layers, d_model 512, vocab 58,101
    python benchmarks/pretrained.py --json pretrained.json --threads 4
    python benchmarks/pretrained.py --layers 1 --d-model 32 --heads 2 --ffn 64 --vocab 300 --sentences 4 \\
        --max-new-tokens 8                                # a quick check that everything runs
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # tests.importers.marian_files writes the checkpoint
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from common import print_table  # noqa: E402

ENGINES = ("ours", "transformers", "ctranslate2")
ENGINE_NAMES = {"ours": "ours (SavedModel, XLA)", "transformers": "transformers (torch)",
                "ctranslate2": "CTranslate2 fp32"}
BATCHES = (1, 8)
BEAM = 4
DECODINGS = ((1, "greedy"), (BEAM, f"beam {BEAM}"))
RARE_LOGIT_BIAS = -100.0  # tokens that are not pieces of target.spm: computed, never chosen
SPEED_UP_GOAL = 3.0


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=6, help="encoder layers, and as many decoder layers")
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--ffn", type=int, default=2048, help="feed-forward width")
    parser.add_argument("--vocab", type=int, default=58101,
                        help="tokens in vocab.json (opus-mt-de-en has 58,101); filler tokens make up the size")
    parser.add_argument("--sentences", type=int, default=32, help="test sentences, timed at each batch size")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="most output tokens, for every engine")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of every engine")
    parser.add_argument("--repeats", type=int, default=2, help="timed passes per engine; the fastest counts")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    parser.add_argument("--json", help="also write the numbers here")
    return parser.parse_args(argv)


def cpu_model():
    """lscpu's "Model name" (or /proc/cpuinfo's), e.g. "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"."""
    try:
        output = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in output.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def set_threads(threads):
    """The same number of CPU threads for TensorFlow (and XLA, which runs on its intra-op pool) and torch;
    CTranslate2 takes its own when a translator is made. Also quiets transformers' progress bars and notices."""
    import tensorflow as tf
    import torch
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    torch.set_num_threads(threads)


def write_checkpoint(directory, args):
    """A random-weight Marian checkpoint with `args.vocab` tokens in `vocab.json` (as close as the generated
    SentencePiece pieces allow); returns its directory and its vocabulary size."""
    import sentencepiece
    import torch

    from tests.importers.marian_files import make_marian_checkpoint

    # The pieces of the two SentencePiece models come first: a tiny probe checkpoint counts them.
    probe = os.path.join(directory, "probe")
    make_marian_checkpoint(probe, d_model=8, layers=1, heads=1, ffn=8, seed=args.seed)
    with open(os.path.join(probe, "vocab.json"), encoding="utf-8") as f:
        pieces = len(json.load(f))
    shutil.rmtree(probe)
    checkpoint = os.path.join(directory, "checkpoint")
    model, config = make_marian_checkpoint(
        checkpoint, d_model=args.d_model, layers=args.layers, heads=args.heads, ffn=args.ffn,
        extra_tokens=max(0, args.vocab - pieces), max_positions=512, seed=args.seed)
    with open(os.path.join(checkpoint, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    # Tokens that target.spm does not know: <unk>, the fillers, the source side's pieces of the shared vocabulary.
    target = sentencepiece.SentencePieceProcessor(model_file=os.path.join(checkpoint, "target.spm"))
    rare = [i for token, i in vocab.items() if token not in ("</s>", "<pad>")
            and target.piece_to_id(token) == target.unk_id()]
    with torch.no_grad():
        model.get_input_embeddings().weight[config.pad_token_id].zero_()
        model.final_logits_bias[0, rare] = RARE_LOGIT_BIAS
    model.save_pretrained(checkpoint)
    return checkpoint, len(vocab)


def make_ours(checkpoint, directory, max_length):
    """`translate(texts, beam) -> (translations, tokens)` with our SavedModel, and the tokens counter."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops the SavedModel uses)

    from keras_transformer import export_run
    from keras_transformer.importers import import_marian

    run_dir = import_marian(checkpoint, os.path.join(directory, "run"), verbose=0)
    saved_model = export_run(run_dir, saved_model=os.path.join(directory, "saved_model"), max_length=max_length,
                             beam_size=1, length_penalty=1.0, length_penalty_rule="transformers",
                             force_end=False, verbose=0)["saved_model"]
    loaded = tf.saved_model.load(saved_model)
    signatures = {1: loaded.signatures["serving_default"], BEAM: loaded.signatures["translate_beam"]}

    def translate(texts, beam):
        out = signatures[beam](text=tf.constant(texts))["translation"].numpy()
        return [t.decode("utf-8") for t in out], None

    return translate, run_dir


def count_our_tokens(run_dir, texts, max_length):
    """`{beam: (tokens per text, translations)}`: the tokens our decoding produces for each text (the imported run
    decoded in Python, settings as exported) and the translations they detokenize to (the SavedModel's)."""
    import numpy as np

    from keras_transformer import load_run
    from keras_transformer.decoding.translator import Translator
    from keras_transformer.decoding.translator import sampler_for
    from keras_transformer.decoding.tuning import DecodingSettings

    run = load_run(run_dir)
    translator = Translator(run.model, run.source_tokenizer, run.target_tokenizer, max_length=max_length,
                            jit_compile=False)
    end = run.target_tokenizer.end_id
    counted = {}
    for beam, _ in DECODINGS:
        settings = DecodingSettings(beam_size=beam, length_penalty=1.0, length_penalty_rule="transformers")
        tokens, _ = translator.translate_ids(texts, sampler_for(settings))
        counts = [int(np.sum((row != 0) & (row != end))) for row in tokens]
        decoded = [t.decode("utf-8") for t in run.target_tokenizer.detokenize(tokens).numpy()]
        counted[beam] = counts, decoded
    return counted


def make_transformers(checkpoint, max_new_tokens):
    import torch
    from transformers import MarianMTModel
    from transformers import MarianTokenizer

    tokenizer = MarianTokenizer.from_pretrained(checkpoint)
    model = MarianMTModel.from_pretrained(checkpoint).eval()
    special = {tokenizer.pad_token_id, tokenizer.eos_token_id}

    def translate(texts, beam):
        with torch.inference_mode():
            batch = tokenizer(texts, return_tensors="pt", padding=True)
            out = model.generate(**batch, num_beams=beam, do_sample=False, max_new_tokens=max_new_tokens,
                                 forced_eos_token_id=None)
        tokens = [sum(1 for i in row[1:].tolist() if i not in special) for row in out]
        return tokenizer.batch_decode(out, skip_special_tokens=True), tokens

    return translate


def make_ctranslate2(checkpoint, directory, max_new_tokens, threads):
    import ctranslate2
    import sentencepiece

    path = ctranslate2.converters.TransformersConverter(checkpoint).convert(os.path.join(directory, "ct2"))
    translator = ctranslate2.Translator(path, device="cpu", compute_type="float32", intra_threads=threads,
                                        inter_threads=1)
    source = sentencepiece.SentencePieceProcessor(model_file=os.path.join(checkpoint, "source.spm"))
    target = sentencepiece.SentencePieceProcessor(model_file=os.path.join(checkpoint, "target.spm"))

    def translate(texts, beam):
        pieces = [row + ["</s>"] for row in source.encode(texts, out_type=str)]
        results = translator.translate_batch(pieces, beam_size=beam, max_decoding_length=max_new_tokens,
                                             min_decoding_length=0, max_batch_size=len(texts))
        hypotheses = [r.hypotheses[0] for r in results]
        return [target.decode(h) for h in hypotheses], [len(h) for h in hypotheses]

    return translate


def timed_pass(translate, chunks, beam):
    """(seconds, translations, tokens per sentence or None) of one pass over `chunks`."""
    outputs, tokens, seconds = [], [], 0.0
    for chunk in chunks:
        start = time.perf_counter()
        texts, counts = translate(chunk, beam)
        seconds += time.perf_counter() - start
        outputs += texts
        tokens = None if counts is None else tokens + counts
    return seconds, outputs, tokens


def main(argv=None):
    args = parse_args(argv)
    set_threads(args.threads)
    # MarianTokenizer's advice to install sacremoses (here and in CTranslate2's converter): no text needs it here.
    warnings.filterwarnings("ignore", message=".*sacremoses")
    from tests.importers.marian_files import WORDS
    from tests.importers.marian_files import sentences

    cpu = cpu_model()
    texts = sentences(WORDS, args.sentences, seed=args.seed + 7)
    work = tempfile.mkdtemp(prefix="kt-pretrained-")
    try:
        print(f"Writing a random-weight Marian checkpoint ({args.layers}+{args.layers} layers, d_model "
              f"{args.d_model}, {args.heads} heads, ffn {args.ffn}) into {work} ...", flush=True)
        checkpoint, vocab_size = write_checkpoint(work, args)
        print(f"Importing and exporting it (SavedModel, max_length {args.max_new_tokens}) ...", flush=True)
        ours, run_dir = make_ours(checkpoint, work, args.max_new_tokens)
        print("Converting it with CTranslate2's TransformersConverter ...", flush=True)
        engines = {"ours": ours,
                   "transformers": make_transformers(checkpoint, args.max_new_tokens),
                   "ctranslate2": make_ctranslate2(checkpoint, work, args.max_new_tokens, args.threads)}
        print("Counting the tokens of our translations ...", flush=True)
        our_tokens = count_our_tokens(run_dir, texts, args.max_new_tokens)
        load_before = os.getloadavg()[0]
        rows, outputs = [], {}
        for batch in BATCHES:
            chunks = [texts[i: i + batch] for i in range(0, len(texts), batch)]
            for beam, decoding in DECODINGS:
                for chunk in chunks:  # every shape of ours compiles on its first call
                    engines["ours"](chunk, beam)
                engines["transformers"](chunks[0], beam)
                engines["ctranslate2"](chunks[0], beam)
                best = {}
                for _ in range(args.repeats):  # the engines take turns; each keeps its fastest pass
                    for engine in ENGINES:
                        result = timed_pass(engines[engine], chunks, beam)
                        if engine not in best or result[0] < best[engine][0]:
                            best[engine] = result
                for engine in ENGINES:
                    seconds, translations, tokens = best[engine]
                    if tokens is None:
                        tokens = our_tokens[beam][0]
                    outputs[(engine, batch, beam)] = translations
                    rows.append({"engine": engine, "batch": batch, "decoding": decoding, "beam": beam,
                                 "ms_per_sentence": 1000 * seconds / len(texts),
                                 "tokens_per_sentence": sum(tokens) / len(tokens)})
                print(f"  batch {batch}, {decoding}: " + ", ".join(
                    f"{r['engine']} {r['ms_per_sentence']:.1f} ms" for r in rows[-len(ENGINES):]), flush=True)
        load_after = os.getloadavg()[0]
    finally:
        shutil.rmtree(work, ignore_errors=True)

    ms = {(r["engine"], r["batch"], r["beam"]): r["ms_per_sentence"] for r in rows}
    for r in rows:
        key = (r["batch"], r["beam"])
        r["speed_up_vs_transformers"] = ms[("transformers", *key)] / r["ms_per_sentence"]
        r["ratio_to_ctranslate2"] = r["ms_per_sentence"] / ms[("ctranslate2", *key)]

    print(f"\nCPU: {cpu}; {args.threads} threads per engine; load average {load_before:.2f} before the timed "
          f"passes, {load_after:.2f} after")
    print(f"Model: Marian {args.layers}+{args.layers} layers, d_model {args.d_model}, {args.heads} heads, ffn "
          f"{args.ffn}, vocabulary {vocab_size:,}, random weights; {len(texts)} sentences, at most "
          f"{args.max_new_tokens} new tokens; "
          + (f"the fastest of {args.repeats} passes\n" if args.repeats > 1 else "one pass\n"))
    print_table(
        ["engine", "batch", "decoding", "ms/sentence", "tokens/sentence", "speed-up vs transformers", "x CT2"],
        [[ENGINE_NAMES[r["engine"]], r["batch"], r["decoding"], f"{r['ms_per_sentence']:.1f}",
          f"{r['tokens_per_sentence']:.1f}", f"{r['speed_up_vs_transformers']:.2f}x",
          f"{r['ratio_to_ctranslate2']:.2f}"] for r in rows])

    goals = []
    for beam, decoding in DECODINGS:
        ratio = ms[("ours", 1, beam)] / ms[("ctranslate2", 1, beam)]
        goals.append({"goal": f"ours <= CTranslate2 fp32, batch 1, {decoding}", "passed": ratio <= 1.0,
                      "measured": f"{ratio:.2f}x CTranslate2's time", "value": ratio})
    for batch in BATCHES:
        for beam, decoding in DECODINGS:
            speed_up = ms[("transformers", batch, beam)] / ms[("ours", batch, beam)]
            goals.append({"goal": f"ours >= {SPEED_UP_GOAL:g}x faster than transformers, batch {batch}, {decoding}",
                          "passed": speed_up >= SPEED_UP_GOAL, "measured": f"{speed_up:.2f}x faster",
                          "value": speed_up})
    print("\nGoals:")
    for goal in goals:
        print(f"  {'PASS' if goal['passed'] else 'FAIL'}  {goal['goal']}: {goal['measured']}")

    agreement = []
    print("\nSame outputs (lines equal to transformers'):")
    for batch in BATCHES:
        for beam, decoding in DECODINGS:
            reference = outputs[("transformers", batch, beam)]
            equal = {engine: sum(a == b for a, b in zip(outputs[(engine, batch, beam)], reference))
                     for engine in ("ours", "ctranslate2")}
            all_three = sum(a == b == c for a, b, c in zip(outputs[("ours", batch, beam)], reference,
                                                           outputs[("ctranslate2", batch, beam)]))
            agreement.append({"batch": batch, "decoding": decoding, "ours": equal["ours"],
                              "ctranslate2": equal["ctranslate2"], "all_three": all_three, "sentences": len(texts)})
            print(f"  batch {batch}, {decoding:7}: ours {equal['ours']}/{len(texts)}, CTranslate2 "
                  f"{equal['ctranslate2']}/{len(texts)}, all three {all_three}/{len(texts)}")
    for beam, decoding in DECODINGS:
        counted = sum(a == b for a, b in zip(our_tokens[beam][1], outputs[("ours", 1, beam)]))
        if counted != len(texts):
            print(f"  note: our {decoding} tokens were counted in Python on {counted}/{len(texts)} outputs equal "
                  "to the SavedModel's")
    greedy = [a for a in agreement if a["decoding"] == "greedy"]
    same = all(a["all_three"] == a["sentences"] for a in greedy)
    print(f"greedy outputs of the three engines: {'all equal' if same else 'NOT all equal'}; "
          f"{sum(g['passed'] for g in goals)}/{len(goals)} goals met")

    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"cpu": cpu, "threads": args.threads, "load_average": [load_before, load_after],
                       "model": {"layers": args.layers, "d_model": args.d_model, "heads": args.heads,
                                 "ffn": args.ffn, "vocab": vocab_size},
                       "sentences": len(texts), "max_new_tokens": args.max_new_tokens, "repeats": args.repeats,
                       "rows": rows,
                       "goals": goals, "agreement": agreement}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
