"""The `keras-transformer` command line: train, translate, evaluate, export, plot, quickstart.

Every subcommand has `--help`. Heavy imports (TensorFlow) happen only inside the subcommands, so
`keras-transformer --help` answers at once.
"""

import argparse
import contextlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from keras_transformer.runs.layout import DEFAULT_SAVED_MODELS  # noqa: E402 - no TensorFlow import
from keras_transformer.validation import check_settings  # noqa: E402
from keras_transformer.validation import load_settings_file  # noqa: E402


# Flags shared by `train` and `quickstart`; their dest names are TransformerConfig/TrainingConfig fields.
MODEL_FLAGS = [
    ("--num-layers", int, "encoder and decoder blocks"),
    ("--d-model", int, "model width"),
    ("--num-heads", int, "attention heads"),
    ("--d-ff", int, "feed-forward hidden size"),
    ("--dropout", float, "dropout rate"),
    ("--activation-dropout", float, "dropout inside the feed-forward networks (default: --dropout)"),
    ("--max-length", int, "longest sequence in tokens (longer sentences are truncated)"),
]
TRAINING_FLAGS = [
    ("--epochs", int, "training epochs"),
    ("--batch-size", int, "sentence pairs per batch (the largest, with --token-budget)"),
    ("--token-budget", int, "tokens per batch: short-sentence buckets get more sentences"),
    ("--vocab-size", int, "subword vocabulary size (per language, or shared)"),
    ("--warmup-steps", int, "learning-rate warm-up steps"),
    ("--lr-scale", float, "multiplies the paper's learning-rate schedule"),
    ("--label-smoothing", float, "label smoothing of the loss"),
    ("--patience", int, "stop after this many epochs without validation improvement"),
    ("--average-last", int, "average the weights of the last N epochs at the end"),
    ("--max-minutes", float, "stop before this much training wall time (counted across resumes)"),
    ("--seed", int, "random seed"),
    ("--max-words", int, "skip (and count) pairs with more whitespace-separated words than this on a side"),
    ("--vocab-sample", int, "learn the vocabulary from a random sample of this many pairs (default 200000)"),
    ("--shuffle-buffer", int, "pairs shuffled together (bounded memory; default 100000)"),
    ("--checkpoint-every", int, "also save a resumable checkpoint every N batches (default: at epoch ends)"),
]


def _add_settings_flags(parser):
    group = parser.add_argument_group("model (default: the paper's base model, or --config)")
    for flag, kind, text in MODEL_FLAGS:
        group.add_argument(flag, type=kind, default=None, help=text)
    group.add_argument("--norm-first", action="store_true", default=None, help="pre-norm blocks")
    group.add_argument("--share-embeddings", action="store_true", default=None,
                       help="one embedding for source and target (implies --shared-vocab)")
    group.add_argument("--tie-output", action="store_true", default=None,
                       help="output projection tied to the target embedding")
    group = parser.add_argument_group("training")
    for flag, kind, text in TRAINING_FLAGS:
        group.add_argument(flag, type=kind, default=None, help=text)
    group.add_argument("--decay", choices=["inverse_sqrt", "cosine"], default=None,
                       help="learning-rate decay after the warm-up: the paper's inverse square root (default) or "
                            "cosine to zero at the end of the last epoch")
    group.add_argument("--shared-vocab", action="store_true", default=None,
                       help="one subword vocabulary for both languages")
    group.add_argument("--jit-compile", action=argparse.BooleanOptionalAction, default=None,
                       help="compile the train step with XLA (default on: 2-3x faster on CPU)")


def _collect_settings(args):
    names = [flag[2:].replace("-", "_") for flag, _, _ in MODEL_FLAGS + TRAINING_FLAGS]
    names += ["norm_first", "share_embeddings", "tie_output", "shared_vocab", "jit_compile", "decay"]
    settings = {}
    if getattr(args, "config", None):
        settings.update({k.replace("-", "_"): v for k, v in load_settings_file(args.config).items()})
    settings.update({name: getattr(args, name) for name in names if getattr(args, name, None) is not None})
    if settings.get("share_embeddings"):
        settings["shared_vocab"] = True
    check_settings(settings)  # every setting checked before TensorFlow is even imported
    return settings


def _read_stdin_lines():
    """Stdin's lines: UTF-8 (else one error naming the line), a BOM and CRLF ends removed, split on "\\n" only
    (so a form feed or a Unicode line separator inside a sentence never changes the number of output lines)."""
    from keras_transformer.data.corpus import decode_lines

    return decode_lines(sys.stdin.buffer.read(), "<stdin>")


# ---------------------------------------------------------------------------------------------
# Subcommands


def _distribution_config(args):
    from keras_transformer.training.distribution import DistributionConfig

    return DistributionConfig(mode=args.distribute, devices=args.devices, coordinator=args.coordinator,
                              num_processes=args.num_processes, process_id=args.process_id,
                              timeout=args.coordinator_timeout).validate()


def cmd_train(args):
    # `main` checked the settings and the distribution, and chose the backend, before Keras was imported.
    distribution, settings = args.distribution, args.settings
    if bool(args.val_src) != bool(args.val_tgt):
        raise ValueError("--val-src and --val-tgt go together")
    from keras_transformer.data.corpus import read_parallel_corpus
    from keras_transformer.data.streaming import scan_corpus
    from keras_transformer.training.trainer import TrainingConfig, split_settings, train

    model_settings, training_settings = split_settings(settings)
    config = TrainingConfig(**training_settings)
    verbose = 1 if sys.stdout.isatty() else 2
    print(f"Reading {' '.join(args.src)} / {' '.join(args.tgt)} (one pass: line counts, UTF-8, a vocabulary "
          f"sample of up to {config.vocab_sample:,} pairs)", flush=True)
    val = read_parallel_corpus(args.val_src, args.val_tgt) if args.val_src else None
    # The scan goes straight to train() (no reference kept here): its vocabulary sample is freed once used.
    train(scan_corpus(args.src, args.tgt, sample_size=config.vocab_sample, max_words=config.max_words,
                      seed=config.seed, verbose=1 if verbose == 1 else 0),
          args.output, val_data=val, model_settings=model_settings, training_settings=training_settings,
          verbose=verbose, distribution=distribution, overwrite=args.overwrite)
    return 0


def _load_translator(path):
    """A translator for a run directory (from `train`), a preset or an exported SavedModel directory."""
    if os.path.exists(os.path.join(path, "keras_transformer_ctranslate2.json")):
        from keras_transformer.export.ctranslate2_model import CTranslate2Translator

        return CTranslate2Translator(path)
    if os.path.exists(os.path.join(path, "task.json")):
        from keras_transformer.tasks import TransformerSeq2SeqLM

        return TransformerSeq2SeqLM.from_preset(path)
    if os.path.exists(os.path.join(path, "saved_model.pb")):
        from keras_transformer.export.saved_model import SavedModelTranslator

        return SavedModelTranslator(path)
    from keras_transformer.decoding.translator import Translator
    from keras_transformer.runs.run import load_run

    run = load_run(path)
    return Translator(run.model, run.source_tokenizer, run.target_tokenizer)


def cmd_translate(args):
    translator = _load_translator(args.model)
    lines = _read_stdin_lines()
    if args.plot_attention and not lines:
        raise ValueError("--plot-attention needs at least one input line on stdin")
    outputs = translator.translate(lines, beam_size=args.beam_size, batch_size=args.batch_size,
                                   max_length=args.max_length) if lines else []
    for line in outputs:
        print(line)
    sys.stdout.flush()
    if args.plot_attention:
        translator.plot_attention(lines[0], args.plot_attention, beam_size=args.beam_size)
        print(f"wrote the cross-attention of the first sentence to {args.plot_attention}", file=sys.stderr)
    return 0


def cmd_evaluate(args):
    import sacrebleu

    from keras_transformer.data.corpus import read_parallel_corpus

    corpus = read_parallel_corpus(args.src, args.ref)
    if corpus.dropped_empty:
        print(f"skipping {corpus.dropped_empty} pair(s) with a blank source or reference line "
              f"({len(corpus)} scored)", file=sys.stderr)
    if not len(corpus):
        raise ValueError(f"{args.src} / {args.ref}: no pair with both a source and a reference line to score")
    translator = _load_translator(args.model)
    hypotheses = translator.translate(list(corpus.sources), beam_size=args.beam_size,
                                      batch_size=args.batch_size, max_length=args.max_length, verbose=1)
    refs = [list(corpus.targets)]
    bleu = sacrebleu.corpus_bleu(hypotheses, refs)
    bleu_lc = sacrebleu.corpus_bleu(hypotheses, refs, lowercase=True)
    chrf = sacrebleu.corpus_chrf(hypotheses, refs)
    print(f"sentences: {len(hypotheses)}  decoding: {'beam ' + str(args.beam_size) if args.beam_size > 1 else 'greedy'}")
    print(f"BLEU (cased, detokenized, sacreBLEU 13a) = {bleu.score:.2f}   {bleu}")
    print(f"BLEU (lowercased)                        = {bleu_lc.score:.2f}")
    print(f"chrF                                     = {chrf.score:.2f}")
    if args.output:
        from keras_transformer.atomic import write_text

        write_text(args.output, "\n".join(hypotheses) + "\n")
    return 0


def cmd_plot(args):
    from keras_transformer.training.callbacks import load_history
    from keras_transformer.training.plots import plot_history

    out = args.output or os.path.join(args.run_dir, "history.png")
    plot_history(load_history(os.path.join(args.run_dir, "history.json")), out)
    print(f"wrote {out}")
    return 0


def cmd_quickstart(args):
    from keras_transformer.quickstart import run_quickstart

    run_quickstart(output_dir=args.output, settings=args.settings, num_train=args.num_train,
                   num_heldout=args.num_heldout, overwrite=args.overwrite)
    return 0


def cmd_export(args):
    from keras_transformer.export.exporter import export_run

    if args.ctranslate2:
        from keras_transformer.export.ctranslate2_model import export_ctranslate2

        export_ctranslate2(args.run_dir, args.ctranslate2, quantization=args.ctranslate2_quantization,
                           overwrite=args.overwrite, verbose=1)
        print(f"Try: echo 'a sentence' | keras-transformer translate {args.ctranslate2}")
        if not (args.saved_model or args.tflite or args.preset):
            return 0
    if args.preset:
        from keras_transformer.tasks import TransformerSeq2SeqLM

        if os.path.lexists(args.preset) and not args.overwrite:
            raise FileExistsError(f"{args.preset}: exists; pass --overwrite to replace it with the new preset")
        sampler = {"class_name": "BeamSampler", "config": {"num_beams": args.beam_size}} if args.beam_size > 1 \
            else "greedy"
        task = TransformerSeq2SeqLM.from_run(args.run_dir, sampler=sampler, max_length=args.max_length)
        task.save_to_preset(args.preset, overwrite=args.overwrite)
        print(f"Wrote the preset {args.preset} (keras-hub layout). Try: echo 'a sentence' | keras-transformer "
              f"translate {args.preset}")
        if not (args.saved_model or args.tflite):
            return 0
    export_run(args.run_dir, saved_model=args.saved_model, tflite=args.tflite, beam_size=args.beam_size,
               max_length=args.max_length, tflite_quantize=args.tflite_quantize, overwrite=args.overwrite,
               jit_compile=args.jit_compile)
    return 0


# ---------------------------------------------------------------------------------------------


def positive_int(text):
    """argparse type: an integer >= 1 (argparse prints `argument --x: ...` with it)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def build_parser():
    parser = argparse.ArgumentParser(
        prog="keras-transformer",
        description="Train, run and export encoder-decoder Transformers (Keras 3 on TensorFlow).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--verbose", action="store_true",
                        help="also show TensorFlow's native start-up log lines (absl, oneDNN, CUDA)")

    p = sub.add_parser("train", parents=[common], help="train tokenizers and a model on a parallel corpus",
                       description="Train subword tokenizers and a Transformer on a parallel corpus "
                                   "(one sentence per line, .gz accepted) and write them under --output.")
    p.add_argument("--src", required=True, nargs="+", metavar="FILE",
                   help="source-language file(s): paths or quoted globs of shards, plain or .gz")
    p.add_argument("--tgt", required=True, nargs="+", metavar="FILE",
                   help="target-language file(s), as many shards as --src (line i translates --src line i)")
    p.add_argument("--output", required=True, help="run directory to write (re-run to resume)")
    p.add_argument("--val-src", help="validation source file")
    p.add_argument("--val-tgt", help="validation target file")
    p.add_argument("--config", help="JSON or YAML file with the same settings as the flags (flags win)")
    p.add_argument("--overwrite", action="store_true",
                   help="train from scratch where --output holds a finished or started run (its files are removed)")
    _add_settings_flags(p)
    group = p.add_argument_group("scale out (docs/scaling.md)")
    group.add_argument("--distribute", metavar="{mirrored,multi-host}", default=None,
                       help="mirrored: tf.distribute.MirroredStrategy over the local GPUs (or --devices logical CPU "
                            "devices); multi-host: Keras distribution API on JAX, one command per process")
    group.add_argument("--devices", type=int, default=None, help="mirrored: number of local devices")
    group.add_argument("--coordinator", metavar="HOST:PORT", default=None, help="multi-host: process 0's address")
    group.add_argument("--num-processes", type=int, default=None, help="multi-host: processes in the run")
    group.add_argument("--process-id", type=int, default=None, help="multi-host: this process (0 writes --output)")
    group.add_argument("--coordinator-timeout", type=float, default=300.0,
                       help="multi-host: seconds to wait for the other processes (default 300)")
    p.set_defaults(func=cmd_train)

    def add_decoding_flags(p):
        p.add_argument("--beam-size", type=positive_int, default=1, help="1 = greedy (default); the paper uses 4")
        p.add_argument("--batch-size", type=positive_int, default=32, help="sentences decoded together")
        p.add_argument("--max-length", type=positive_int, default=None, help="longest output in tokens")

    p = sub.add_parser("translate", parents=[common], help="translate stdin to stdout",
                       description="Read sentences on stdin (one per line), write translations on stdout.")
    p.add_argument("model", help="run directory (from `train`), preset (`export --preset`), exported SavedModel or "
                                 "CTranslate2 directory (`export --ctranslate2`)")
    add_decoding_flags(p)
    p.add_argument("--plot-attention", metavar="FILE.png",
                   help="also save a heat map of the cross-attention for the first sentence")
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("evaluate", parents=[common], help="sacreBLEU and chrF on a test set",
                       description="Translate --src and score against --ref with sacreBLEU (cased, detokenized; "
                                   "also lowercased) and chrF.")
    p.add_argument("model", help="run directory or exported SavedModel directory")
    p.add_argument("--src", required=True, help="source sentences")
    p.add_argument("--ref", required=True, help="reference translations")
    p.add_argument("--output", help="also write the translations to this file")
    add_decoding_flags(p)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("export", parents=[common], help="export a run as a SavedModel (and TFLite)",
                       description="Export a trained run as a string-to-string SavedModel, and optionally TFLite.")
    p.add_argument("run_dir", help="run directory written by `train`")
    p.add_argument("--saved-model", default=None,
                   help=f"output SavedModel directory (default {DEFAULT_SAVED_MODELS}/<run name>)")
    p.add_argument("--tflite", default=None, help="also write a TFLite model to this file")
    p.add_argument("--ctranslate2", default=None, metavar="DIR",
                   help="write a CTranslate2 model directory (needs the ctranslate2 extra); translate takes it; "
                        "alone, no SavedModel is written")
    p.add_argument("--ctranslate2-quantization", default=None, metavar="TYPE",
                   help="CTranslate2 weight type, e.g. int8 or float16 (default float32)")
    p.add_argument("--preset", default=None, metavar="DIR",
                   help="write a keras-hub style preset (TransformerSeq2SeqLM.from_preset loads it; translate takes "
                        "it); alone, no SavedModel is written")
    p.add_argument("--tflite-quantize", choices=["float16", "dynamic_range"], default=None,
                   help="TFLite weights in float16 (half the weight bytes) or int8 (dynamic range)")
    p.add_argument("--beam-size", type=positive_int, default=1, help="decoding of the serving signature")
    p.add_argument("--max-length", type=positive_int, default=None, help="longest output in tokens")
    p.add_argument("--jit-compile", action=argparse.BooleanOptionalAction, default=True,
                   help="the SavedModel decodes in one XLA program (default: 3-4x faster on CPU; TF Serving needs "
                        "--xla_cpu_compilation_enabled=true); --no-jit-compile writes plain graph ops")
    p.add_argument("--overwrite", action="store_true", help="replace an existing SavedModel / TFLite file")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("plot", parents=[common], help="plot training curves of a run",
                       description="Plot loss/accuracy curves from RUN_DIR/history.json to a PNG.")
    p.add_argument("run_dir")
    p.add_argument("--output", help="PNG path (default RUN_DIR/history.png)")
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("quickstart", parents=[common], help="the main job on the embedded data (no download)",
                       description="Train on a built-in synthetic date-translation corpus (spelled-out English "
                                   "dates -> ISO dates), report held-out exact match and show translations.")
    p.add_argument("--output", default=os.path.join(DEFAULT_SAVED_MODELS, "quickstart"))
    p.add_argument("--num-train", type=positive_int, default=None, help="training pairs")
    p.add_argument("--num-heldout", type=positive_int, default=None, help="held-out pairs")
    p.add_argument("--overwrite", action="store_true", help="train again where --output holds a finished run")
    p.add_argument("--config", help="JSON or YAML settings file")
    _add_settings_flags(p)
    p.set_defaults(func=cmd_quickstart)
    return parser


@contextlib.contextmanager
def _native_stderr_silenced():
    """Points file descriptor 2 at /dev/null: TensorFlow's C++ libraries log there at load time (absl lines about
    oneDNN, CUDA and CPU features) whatever TF_CPP_MIN_LOG_LEVEL says. Python's own stderr is restored before any
    error is reported."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _import_tensorflow(quiet):
    """Loads TensorFlow and tensorflow-text (all their native libraries) up front, silenced unless `--verbose`."""
    if "tensorflow" in sys.modules or not quiet:
        return
    with _native_stderr_silenced():
        import tensorflow  # noqa: F401
        import tensorflow_text  # noqa: F401


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    import warnings

    def show_note(message, category, *_args, **_kwargs):
        # The package's own warnings (a setting that could not be honoured as given) as one line each.
        if category.__module__.startswith("keras_transformer"):
            print(f"keras-transformer {args.command}: note: {message}", file=sys.stderr)
        else:
            default_showwarning(message, category, *_args, **_kwargs)

    default_showwarning = warnings.showwarning
    warnings.showwarning = show_note
    try:
        if args.command in ("train", "quickstart"):
            args.settings = _collect_settings(args)  # every setting checked before TensorFlow is even imported
        if args.command == "train":
            # The distribution picks the Keras backend, which must be set before TensorFlow (which imports Keras).
            from keras_transformer.training.distribution import set_backend_for

            args.distribution = _distribution_config(args)
            set_backend_for(args.distribution.mode)
        if args.command != "plot":
            _import_tensorflow(quiet=not args.verbose)
        return args.func(args)
    except (ValueError, OSError) as error:
        # Every error the package raises for bad input or a bad file names the input (one line, no traceback).
        message = str(error) if not isinstance(error, OSError) or not error.filename or str(error.filename) in str(
            error) else f"{error.filename}: {error.strerror}"
        print(f"keras-transformer {args.command}: error: {' '.join(message.split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"keras-transformer {args.command}: interrupted" + (" (re-run the same command to resume)"
                                                                   if args.command in ("train", "quickstart") else ""),
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
