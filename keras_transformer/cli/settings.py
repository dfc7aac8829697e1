"""What several commands share: the model/training flags (`train`, `quickstart`), argparse types, stdin."""

import argparse
import sys

from keras_transformer.validation import check_settings
from keras_transformer.validation import load_settings_file

# Flags shared by `train` and `quickstart`; their dest names are TransformerConfig/TrainingConfig fields.
MODEL_FLAGS = [
    ("--num-layers", int, "encoder and decoder blocks"),
    ("--d-model", int, "model width"),
    ("--num-heads", int, "attention heads"),
    ("--d-ff", int, "feed-forward hidden size"),
    ("--dropout", float, "dropout rate"),
    ("--attention-dropout", float, "dropout on the attention weights (default: --dropout)"),
    ("--activation-dropout", float, "dropout inside the feed-forward networks (default: --dropout)"),
    ("--word-dropout", float, "fraction of whole source and target-input tokens dropped in training (default 0)"),
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
    ("--rdrop", float, "R-Drop: weight of the consistency loss between two dropout passes of each batch "
                       "(default 0: off; each step then costs about twice as much)"),
    ("--patience", int, "stop after this many epochs without validation improvement"),
    ("--average-last", int, "average the weights of the last N epochs at the end"),
    ("--max-minutes", float, "stop before this much training wall time (counted across resumes)"),
    ("--seed", int, "random seed"),
    ("--max-words", int, "skip (and count) pairs with more whitespace-separated words than this on a side"),
    ("--vocab-sample", int, "learn the vocabulary from a random sample of this many pairs (default 200000)"),
    ("--shuffle-buffer", int, "pairs shuffled together (bounded memory; default 100000)"),
    ("--checkpoint-every", int, "also save a resumable checkpoint every N batches (default: at epoch ends)"),
]


def add_settings_flags(parser):
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
                       help="compile the train step with XLA (default on; docs/benchmarks.md has its speed)")
    group.add_argument("--no-max-minutes", action="store_true", default=False,
                       help="drop the --config file's time budget: train its --epochs whatever they take (the "
                            "same work on a slower machine)")


def collect_settings(args):
    names = [flag[2:].replace("-", "_") for flag, _, _ in MODEL_FLAGS + TRAINING_FLAGS]
    names += ["norm_first", "share_embeddings", "tie_output", "shared_vocab", "jit_compile", "decay"]
    settings = {}
    if getattr(args, "config", None):
        settings.update({k.replace("-", "_"): v for k, v in load_settings_file(args.config).items()})
    settings.update({name: getattr(args, name) for name in names if getattr(args, name, None) is not None})
    settings.update({f"{side}_language": getattr(args, f"{side}_lang") for side in ("source", "target")
                     if getattr(args, f"{side}_lang", None) is not None})
    if getattr(args, "no_max_minutes", False):
        if args.max_minutes is not None:
            raise ValueError(f"--max-minutes {args.max_minutes:g} and --no-max-minutes contradict each other: "
                             "give one")
        settings.pop("max_minutes", None)
    if settings.get("share_embeddings"):
        settings["shared_vocab"] = True
    model, training = check_settings(settings)  # every setting checked before TensorFlow is even imported
    if getattr(args, "init_from", None):
        from keras_transformer.runs.directory import init_from_settings

        init_from_settings(args.init_from, args.output, model, training)  # DIR and the flags that contradict it
    else:
        from keras_transformer.runs.directory import refuse_language_pair

        refuse_language_pair(training)
    return settings


def read_stdin_lines():
    """Stdin's lines: UTF-8 (else one error naming the line), a BOM and CRLF ends removed, split on "\\n" only
    (so a form feed or a Unicode line separator inside a sentence never changes the number of output lines)."""
    from keras_transformer.data.corpus import decode_lines

    return decode_lines(sys.stdin.buffer.read(), "<stdin>")


def positive_int(text):
    """argparse type: an integer >= 1 (argparse prints `argument --x: ...` with it)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


# `keras_transformer.decoding.beam_search.LENGTH_PENALTY_RULES`, named here so that parsing imports no Keras.
LENGTH_PENALTY_RULES = ("gnmt", "transformers")


def add_length_penalty_rule_flag(parser, default):
    """`--length-penalty-rule {gnmt,transformers}` (default `None`: `default` says what that means)."""
    parser.add_argument("--length-penalty-rule", choices=LENGTH_PENALTY_RULES, default=None,
                        help="how beam search applies the length penalty: GNMT's ((5 + length) / 6) ** alpha, or "
                             "transformers' length ** alpha with its stopping rule (imported Marian checkpoints "
                             f"then decode as transformers' generate does; default: {default})")


def length_penalty(text):
    """argparse type: a number in [0, 10] (GNMT's alpha)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 10], got {text!r}") from None
    if not 0.0 <= value <= 10.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 10], got {text}")
    return value


def add_language_flags(p, requests=False, fine_tune=False):
    """`--source-lang` / `--target-lang`: a multilingual model's languages (`requests`: the server's defaults for
    requests that give none; `fine_tune`: the corpus' pair, for `train --init-from`)."""
    if fine_tune:
        p.add_argument("--source-lang", metavar="CODE", default=None,
                       help="fine-tuning a multilingual run (--init-from; NLLB-200, M2M-100): the language of --src, "
                            "as its checkpoint names it (NLLB-200: deu_Latn; M2M-100: de); default the run's")
        p.add_argument("--target-lang", metavar="CODE", default=None,
                       help="fine-tuning a multilingual run: the language of --tgt, which the fine-tuned run then "
                            "translates into by default; required where the run has no default")
        return
    scope = "the default for requests that give none; " if requests else ""
    p.add_argument("--source-lang", metavar="CODE", default=None,
                   help="a multilingual model's source language, as its checkpoint names it (NLLB-200: deu_Latn; "
                        f"M2M-100: de); {scope}default the model's")
    p.add_argument("--target-lang", metavar="CODE", default=None,
                   help=f"a multilingual model's target language (NLLB-200: eng_Latn; M2M-100: en); {scope}required "
                        "where the model has no default")
