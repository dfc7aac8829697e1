"""One check for every setting of a run, before any work starts (no TensorFlow import: the CLI answers in a second).

CLI flags, config files and Python arguments all end up as one flat dict of settings; `check_settings` checks each
one against its rule and the combinations that must agree, and raises `SettingError` with the setting's name, the
value and what is allowed. Nothing is changed behind the user's back: a value is either accepted as given or refused.
`TransformerConfig` and `TrainingConfig` run the same rules when they are built, so the Python API gets the same
messages as the command line.

Example:

>>> model, training = check_settings({"num-layers": 2, "epochs": 3})
>>> model, training
({'num_layers': 2}, {'epochs': 3})
>>> check_settings({"num_layers": -1})
Traceback (most recent call last):
...
keras_transformer.validation.SettingError: num_layers (--num-layers) = -1: must be an integer >= 1 and <= 1000
"""

import math
import numbers


class SettingError(ValueError):
    """A setting with a value that is not allowed; the message names the setting, the value and the rule.

    Example:

    >>> try:
    ...     check_settings({"dropout": 1.5})
    ... except SettingError as error:
    ...     print(error)
    dropout (--dropout) = 1.5: must be a number >= 0 and < 1
    """


class _Rule:
    def __init__(self, kind, minimum=None, maximum=None, below=None, optional=False, choices=None, text=None,
                 above=None):
        self.kind = kind  # "int", "float", "bool", "str", "choice"
        self.minimum = minimum
        self.above = above  # exclusive lower bound (floats)
        self.maximum = maximum
        self.below = below  # exclusive upper bound (floats)
        self.optional = optional
        self.choices = choices
        self.text = text

    def describe(self):
        if self.text:
            return self.text
        if self.kind == "bool":
            return "must be true or false"
        if self.kind == "choice":
            return f"must be one of {', '.join(repr(c) for c in self.choices)}"
        if self.kind == "str":
            return "must be a non-empty string"
        noun = "an integer" if self.kind == "int" else "a number"
        bounds = []
        if self.minimum is not None:
            bounds.append(f">= {self.minimum}")
        if self.above is not None:
            bounds.append(f"> {self.above}")
        if self.maximum is not None:
            bounds.append(f"<= {self.maximum}")
        if self.below is not None:
            bounds.append(f"< {self.below}")
        text = f"must be {noun}" + (" " + " and ".join(bounds) if bounds else "")
        return text + (" (or unset)" if self.optional else "")

    def accepts(self, value):
        if value is None:
            return self.optional
        if self.kind == "bool":
            return isinstance(value, bool)
        if self.kind == "choice":
            return isinstance(value, str) and value in self.choices
        if self.kind == "str":
            return isinstance(value, str) and bool(value.strip())
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        if self.kind == "int" and not isinstance(value, numbers.Integral):
            return False
        if not math.isfinite(value):
            return False
        if self.minimum is not None and value < self.minimum:
            return False
        if self.above is not None and value <= self.above:
            return False
        if self.maximum is not None and value > self.maximum:
            return False
        if self.below is not None and value >= self.below:
            return False
        return True


def _int(minimum=1, maximum=None, optional=False):
    return _Rule("int", minimum=minimum, maximum=maximum, optional=optional)


def _rate(optional=False):
    return _Rule("float", minimum=0, below=1, optional=optional)


def _positive(optional=False):
    return _Rule("float", above=0, optional=optional)
_ACTIVATIONS = ("relu", "gelu", "silu", "swish", "elu", "selu", "tanh", "sigmoid", "linear", "leaky_relu",
                "relu6", "mish", "softplus")

# Longest sequence the models are tested with; longer needs more memory than any default batch allows.
MAX_LENGTH_LIMIT = 65_536
# The 4 reserved tokens plus a few dozen characters: below this no corpus of words fits the vocabulary.
MIN_VOCAB_SIZE = 64

MODEL_RULES = {
    "src_vocab_size": _int(5),
    "tgt_vocab_size": _int(5),
    "num_layers": _int(1, 1000),
    "d_model": _int(1, 1_000_000),
    "num_heads": _int(1, 10_000),
    "d_ff": _int(1, 10_000_000),
    "dropout": _rate(),
    "max_length": _int(2, MAX_LENGTH_LIMIT),
    "num_encoder_layers": _int(1, 1000, optional=True),
    "num_decoder_layers": _int(1, 1000, optional=True),
    "attention_dropout": _rate(optional=True),
    "activation_dropout": _rate(optional=True),
    "word_dropout": _rate(),
    "activation": _Rule("choice", choices=_ACTIVATIONS),
    "norm_first": _Rule("bool"),
    "layer_norm_epsilon": _Rule("float", above=0, below=1),
    "position": _Rule("choice", choices=("sinusoidal", "sinusoidal_concat", "sinusoidal_fairseq", "learned", "none")),
    "scale_embeddings": _Rule("bool"),
    "use_rotary": _Rule("bool"),
    "use_bias": _Rule("bool"),
    "share_embeddings": _Rule("bool"),
    "tie_output": _Rule("bool"),
    "output_bias": _Rule("bool"),
    "start_logit_from_padding": _int(1, 100_000_000, optional=True),
}

TRAINING_RULES = {
    "epochs": _int(1, 1_000_000),
    "batch_size": _int(1, 1_000_000),
    "token_budget": _int(1, optional=True),
    "vocab_size": _Rule("int", minimum=MIN_VOCAB_SIZE, maximum=1_000_000,
                        text=f"must be an integer >= {MIN_VOCAB_SIZE} (4 reserved tokens plus the corpus' "
                             "characters) and <= 1000000"),
    "shared_vocab": _Rule("bool"),
    "warmup_steps": _int(0),
    "lr_scale": _positive(),
    "decay": _Rule("choice", choices=("inverse_sqrt", "cosine")),
    "label_smoothing": _rate(),
    "rdrop": _Rule("float", minimum=0, maximum=1000),
    "clipnorm": _positive(optional=True),
    "patience": _int(1, optional=True),
    "average_last": _int(1, 1000),
    "seed": _int(0, 2**31 - 1),
    "jit_compile": _Rule("bool"),
    "max_words": _int(1, optional=True),
    "steps_per_epoch": _int(1, optional=True),
    "max_minutes": _positive(optional=True),
    "checkpoint_every": _int(1, optional=True),
    "vocab_sample": _int(1),
    "shuffle_buffer": _int(1),
    "init_from": _Rule("str", optional=True),  # the run a fine-tune starts from (checked as a directory elsewhere)
    # The language pair of a fine-tune from a multilingual run (checked against its codes elsewhere).
    "source_language": _Rule("str", optional=True),
    "target_language": _Rule("str", optional=True),
}

# Settings the command line has no flag for are still named the same way in messages.
CLI_FLAGS = {name: "--" + name.replace("_", "-") for name in list(MODEL_RULES) + list(TRAINING_RULES)}
CLI_FLAGS.update(source_language="--source-lang", target_language="--target-lang")


def _label(name):
    return f"{name} ({CLI_FLAGS[name]})" if name in CLI_FLAGS else name


def _fail(name, value, rule_text):
    return SettingError(f"{_label(name)} = {value!r}: {rule_text}")


def check_value(name, value, rules):
    """Checks one setting against `rules[name]`; raises `SettingError` naming it."""
    rule = rules[name]
    if not rule.accepts(value):
        raise _fail(name, value, rule.describe())


def check_model(values):
    """Checks `TransformerConfig` fields (a dict; missing ones take their defaults) and their combinations."""
    for name, value in values.items():
        if name in MODEL_RULES:
            check_value(name, value, MODEL_RULES)
    d_model, heads = values.get("d_model", 512), values.get("num_heads", 8)
    if d_model % heads:
        raise SettingError(f"d_model (--d-model) = {d_model}: must be divisible by num_heads (--num-heads) = "
                           f"{heads}")
    if values.get("use_rotary") and (d_model // heads) % 2:
        raise SettingError(f"use_rotary = True: needs an even head size, but d_model / num_heads = {d_model // heads}")
    if values.get("position") == "none" and not values.get("use_rotary"):
        raise SettingError("position = 'none': needs use_rotary = True (else the model sees no word order)")
    if values.get("share_embeddings") and "src_vocab_size" in values and \
            values["src_vocab_size"] != values.get("tgt_vocab_size"):
        raise SettingError(f"share_embeddings = True: needs one shared vocabulary, but src_vocab_size = "
                           f"{values['src_vocab_size']} != tgt_vocab_size = {values.get('tgt_vocab_size')}")
    start = values.get("start_logit_from_padding")
    if start is not None and not (values.get("tie_output") and values.get("output_bias")):
        raise SettingError(f"start_logit_from_padding = {start}: needs tie_output = True and output_bias = True "
                           "(the tied projection's LogitsBias sets that logit)")
    if start is not None and "tgt_vocab_size" in values and start >= values["tgt_vocab_size"]:
        raise SettingError(f"start_logit_from_padding = {start}: must be a target id below tgt_vocab_size = "
                           f"{values['tgt_vocab_size']}")


def check_training(values):
    """Checks `TrainingConfig` fields (a dict) and their combinations."""
    for name, value in values.items():
        if name in TRAINING_RULES:
            check_value(name, value, TRAINING_RULES)
    epochs, average = values.get("epochs", 10), values.get("average_last", 1)
    if average > epochs:
        raise SettingError(f"average_last (--average-last) = {average}: cannot average more epochs than "
                           f"epochs (--epochs) = {epochs}")


def check_settings(settings):
    """Splits a flat dict of settings into `(model, training)` dicts, checking every one.

    Keys may use dashes (`num-layers`) or underscores; `None` values mean "not given" and are dropped.

    Raises:
        SettingError: an unknown setting, a value outside its rule, or settings that contradict each other
            (`share_embeddings` without `shared_vocab`, `d_model` not divisible by `num_heads`, ...).

    Example:

    >>> check_settings({"d-model": 256, "num_heads": 4, "epochs": 5, "clipnorm": None})
    ({'d_model': 256, 'num_heads': 4}, {'epochs': 5})
    """
    if not isinstance(settings, dict):
        raise SettingError(f"settings must be a mapping of names to values, got {type(settings).__name__}")
    flat = {}
    for key, value in settings.items():
        if not isinstance(key, str):
            raise SettingError(f"setting names must be strings, got {key!r}")
        if value is not None:
            flat[key.replace("-", "_")] = value
    unknown = sorted(set(flat) - set(MODEL_RULES) - set(TRAINING_RULES) - {"src_vocab_size", "tgt_vocab_size"})
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], list(MODEL_RULES) + list(TRAINING_RULES), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise SettingError(f"unknown setting {unknown[0]!r}{hint}: model settings are "
                           f"{', '.join(n for n in MODEL_RULES if not n.endswith('vocab_size'))}; training settings "
                           f"are {', '.join(TRAINING_RULES)}")
    model = {k: v for k, v in flat.items() if k in MODEL_RULES and not k.endswith("vocab_size")}
    training = {k: v for k, v in flat.items() if k in TRAINING_RULES}
    for name in ("src_vocab_size", "tgt_vocab_size"):
        if name in flat:
            raise SettingError(f"{name} comes from the trained tokenizers; set vocab_size (--vocab-size) instead")
    check_model(model)
    check_training(training)
    if model.get("share_embeddings") and not training.get("shared_vocab"):
        raise SettingError("share_embeddings (--share-embeddings) = True: needs shared_vocab (--shared-vocab) = True "
                           "(one vocabulary for both languages)")
    max_length = model.get("max_length", 256)
    if "token_budget" in training and training["token_budget"] < max_length:
        raise SettingError(f"token_budget (--token-budget) = {training['token_budget']}: must be at least "
                           f"max_length (--max-length) = {max_length} (a batch must hold one longest sentence)")
    return model, training


def load_settings_file(path):
    """Reads a flat settings file, JSON (`.json`) or YAML (`.yaml`/`.yml`), and checks it with `check_settings`.

    Returns:
        The dict of settings as written (dash or underscore keys).

    Raises:
        SettingError: naming the file, for a file that is missing, not JSON/YAML, not a mapping, or with a
            setting that `check_settings` refuses.
    """
    import json

    is_yaml = str(path).endswith((".yaml", ".yml"))
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as error:
        raise SettingError(f"{path}: cannot read the settings file ({error.__class__.__name__}: "
                           f"{getattr(error, 'strerror', None) or error})") from None
    try:
        if is_yaml:
            import yaml

            values = yaml.safe_load(text) or {}
        else:
            values = json.loads(text)
    except Exception as error:  # noqa: BLE001 - any parser error, reported with the file name
        message = " ".join(str(error).split())
        raise SettingError(f"{path}: not a valid {'YAML' if is_yaml else 'JSON'} file: {message}") from None
    if not isinstance(values, dict):
        raise SettingError(f"{path}: expected a mapping of setting names to values, got {type(values).__name__}")
    try:
        check_settings(values)
    except SettingError as error:
        raise SettingError(f"{path}: {error}") from None
    return values
