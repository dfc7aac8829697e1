"""What several commands share: the model/training flags (`train`, `quickstart`), argparse types, stdin."""

import argparse
import dataclasses
import sys

from keras_transformer.models.config import TransformerConfig
from keras_transformer.runs.config import TrainingConfig
from keras_transformer.runs.config import check_settings
from keras_transformer.runs.config import load_settings_file
from keras_transformer.validation import flag_of

_TYPES = {"int": int, "float": float}


def _add_config_flags(group, config_class):
    """A flag for each field of `config_class` that declares one (its `setting(flag=...)` help); every flag
    defaults to `None` (not given), so that a `--config` file's value or the field's default applies."""
    names = []
    for field in dataclasses.fields(config_class):
        text, rule = field.metadata["flag"], field.metadata["rule"]
        if not text:
            continue
        names.append(field.name)
        if rule.kind == "bool":
            action = argparse.BooleanOptionalAction if field.default else "store_true"
            group.add_argument(flag_of(field.name), action=action, default=None, help=text)
        elif rule.kind == "choice":
            group.add_argument(flag_of(field.name), choices=rule.choices, default=None, help=text)
        else:
            group.add_argument(flag_of(field.name), type=_TYPES[rule.kind], default=None, help=text)
    return names


def add_settings_flags(parser):
    """The model's and the training's flags (`train`, `quickstart`): one per setting that declares one."""
    _add_config_flags(parser.add_argument_group("model (default: the paper's base model, or --config)"),
                      TransformerConfig)
    group = parser.add_argument_group("training")
    _add_config_flags(group, TrainingConfig)
    group.add_argument("--no-max-minutes", action="store_true", default=False,
                       help="drop the --config file's time budget: train its --epochs whatever they take (the "
                            "same work on a slower machine)")


def collect_settings(args):
    names = [field.name for config_class in (TransformerConfig, TrainingConfig)
             for field in dataclasses.fields(config_class) if field.metadata["flag"]]
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
