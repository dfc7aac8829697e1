"""The settings of a training run: `TrainingConfig` (`config.json`'s "training"), and `check_settings`, which
splits a flat dict of settings (flags, a config file) into the model's and the run's and checks each one.

It lives with the run directory because a run records it, and `load_run` reads it back; `train` takes it. Like
`TransformerConfig`, each field declares its rule (and, where `train` has a flag for it, the flag's help). Nothing
here imports Keras: the command line checks its flags before TensorFlow loads.
"""

import dataclasses
import difflib
import json

from keras_transformer.models.config import MODEL_RULES
from keras_transformer.models.config import check_model
from keras_transformer.validation import SettingError
from keras_transformer.validation import check_known
from keras_transformer.validation import choice_rule
from keras_transformer.validation import flag_rule
from keras_transformer.validation import int_rule
from keras_transformer.validation import number_rule
from keras_transformer.validation import rate_rule
from keras_transformer.validation import rules_of
from keras_transformer.validation import setting
from keras_transformer.validation import text_rule

# The 4 reserved tokens plus a few dozen characters: below this no corpus of words fits the vocabulary.
MIN_VOCAB_SIZE = 64
_VOCAB_SIZE = int_rule(MIN_VOCAB_SIZE, 1_000_000, text=f"must be an integer >= {MIN_VOCAB_SIZE} (4 reserved tokens "
                                                          "plus the corpus' characters) and <= 1000000")


@dataclasses.dataclass
class TrainingConfig:
    """Settings of a training run other than the model's architecture; checked when built (`SettingError`).

    Example:

    >>> config = TrainingConfig(epochs=3, batch_size=32)
    >>> config.epochs, config.vocab_size
    (3, 8000)
    >>> TrainingConfig(epochs=0)
    Traceback (most recent call last):
    ...
    keras_transformer.validation.SettingError: epochs (--epochs) = 0: must be an integer >= 1 and <= 1000000
    """

    epochs: int = setting(10, int_rule(1, 1_000_000), flag="training epochs")
    batch_size: int = setting(64, int_rule(1, 1_000_000),
                              flag="sentence pairs per batch (the largest, with --token-budget)")
    token_budget: int | None = setting(None, int_rule(1, optional=True),
                                       flag="tokens per batch: short-sentence buckets get more sentences")
    vocab_size: int = setting(8000, _VOCAB_SIZE, flag="subword vocabulary size (per language, or shared)")
    shared_vocab: bool = setting(False, flag_rule(), flag="one subword vocabulary for both languages")
    warmup_steps: int = setting(4000, int_rule(0), flag="learning-rate warm-up steps")
    lr_scale: float = setting(1.0, number_rule(above=0), flag="multiplies the paper's learning-rate schedule")
    decay: str = setting("inverse_sqrt", choice_rule(("inverse_sqrt", "cosine")),
                         flag="learning-rate decay after the warm-up: the paper's inverse square root (default) or "
                              "cosine to zero at the end of the last epoch")
    label_smoothing: float = setting(0.1, rate_rule(), flag="label smoothing of the loss")
    rdrop: float = setting(0.0, number_rule(minimum=0, maximum=1000),
                           flag="R-Drop: weight of the consistency loss between two dropout passes of each batch "
                                "(default 0: off; each step then costs about twice as much)")
    clipnorm: float | None = setting(None, number_rule(above=0, optional=True))
    patience: int | None = setting(None, int_rule(1, optional=True),
                                   flag="stop after this many epochs without validation improvement")
    average_last: int = setting(1, int_rule(1, 1000), flag="average the weights of the last N epochs at the end")
    seed: int = setting(0, int_rule(0, 2**31 - 1), flag="random seed")
    jit_compile: bool = setting(True, flag_rule(),
                                flag="compile the train step with XLA (default on; docs/benchmarks.md has its speed)")
    max_words: int | None = setting(None, int_rule(1, optional=True),
                                    flag="skip (and count) pairs with more whitespace-separated words than this on "
                                         "a side")
    steps_per_epoch: int | None = setting(None, int_rule(1, optional=True))
    max_minutes: float | None = setting(None, number_rule(above=0, optional=True),
                                        flag="stop before this much training wall time (counted across resumes)")
    checkpoint_every: int | None = setting(None, int_rule(1, optional=True),
                                           flag="also save a resumable checkpoint every N batches (default: at "
                                                "epoch ends)")
    vocab_sample: int = setting(200_000, int_rule(1), flag="learn the vocabulary from a random sample of this many "
                                                           "pairs (default 200000)")
    shuffle_buffer: int = setting(100_000, int_rule(1), flag="pairs shuffled together (bounded memory; default "
                                                             "100000)")
    # The run a fine-tune started from (absolute path; `train(init_from=...)`; checked as a directory elsewhere).
    init_from: str | None = setting(None, text_rule(optional=True))
    # A fine-tune of a multilingual run: the language pair it learns (checked against the run's codes elsewhere).
    source_language: str | None = setting(None, text_rule(optional=True))
    target_language: str | None = setting(None, text_rule(optional=True))

    def __post_init__(self):
        check_training(dataclasses.asdict(self))


TRAINING_RULES = rules_of(TrainingConfig)


def check_training(values):
    """Checks `TrainingConfig` fields (a dict) and their combinations."""
    check_known(values, TRAINING_RULES)
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
    unknown = sorted(set(flat) - set(MODEL_RULES) - set(TRAINING_RULES))
    if unknown:
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
