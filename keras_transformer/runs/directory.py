"""The run directory: what is in it, whether `train` may write it, and what `--overwrite` removes.

`check_output_path` and `prepare_run_directory` run before any work starts. They refuse, with one clear line:

* an `--output` that is a file, or a non-empty directory that is not a run directory (nothing of the user's is
  ever written over);
* a finished run (its `model.keras` is there and no checkpoint is left to resume) unless `overwrite`;
* a run that started with other settings than this call asks for (resuming it would mix two models);
* a run to fine-tune from (`--init-from`) that is missing, damaged, the `--output` itself, or whose model the
  settings contradict (`init_from_settings`).

It removes what a killed process left half-written (`keras_transformer.atomic.clean_temporaries`).
"""

import difflib
import json
import os
import shutil

from keras_transformer.atomic import clean_temporaries
from keras_transformer.models.config import MODEL_RULES
from keras_transformer.models.config import check_model
from keras_transformer.runs.layout import CHECKPOINT_DIR
from keras_transformer.runs.layout import CONFIG_FILE
from keras_transformer.runs.layout import LOCK_FILE
from keras_transformer.runs.layout import MODEL_FILE
from keras_transformer.runs.layout import RUN_ENTRIES
from keras_transformer.runs.layout import SOURCE_TOKENIZER
from keras_transformer.runs.layout import TARGET_TOKENIZER
from keras_transformer.validation import SettingError
from keras_transformer.validation import flag_of
from keras_transformer.validation import label

# Training settings that a resumed run must share with the run it continues (the model settings all must).
RESUME_TRAINING_SETTINGS = ("vocab_size", "shared_vocab", "batch_size", "token_budget", "max_words", "seed",
                            "vocab_sample")
# Model settings a fine-tune (`--init-from`) may change: the dropout rates, which shape no weight (fine-tuning often
# wants other ones). Every other model setting, and the vocabulary, are those of the run it starts from.
FINE_TUNE_OVERRIDABLE = ("dropout", "attention_dropout", "activation_dropout", "word_dropout")


class RunDirectoryError(ValueError):
    """An `--output` that `train` must not write (the message says why and what to do)."""


def is_run_directory(path):
    """Whether `path` is a directory that `train` wrote (or started to write)."""
    if not os.path.isdir(path):
        return False
    names = set(os.listdir(path))
    return bool(names & (set(RUN_ENTRIES) | {LOCK_FILE})) or any(n.startswith((".tmp-", ".old-")) for n in names)


def check_output_path(path):
    """Creates the run directory `path`, refusing a file or a non-empty directory that is not a run directory.

    Raises:
        RunDirectoryError: naming `path` and what to do.
    """
    if os.path.lexists(path) and not os.path.isdir(path):
        raise RunDirectoryError(f"{path}: exists and is not a directory; --output must name a run directory "
                                "(new, or one to resume)")
    if os.path.isdir(path) and os.listdir(path) and not is_run_directory(path):
        raise RunDirectoryError(f"{path}: not empty and not a keras-transformer run directory; choose a new or empty "
                                "--output (nothing there is written over)")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        raise RunDirectoryError(f"{path}: cannot create the run directory ({error.strerror})") from None


def prepare_run_directory(path, overwrite=False):
    """Cleans what a killed run left in `path` and decides whether this run is new, resumed or overwritten.

    Call it with the run's lock held (`RunLock`), after `check_output_path`.

    Args:
        path: the run directory (`--output`).
        overwrite: remove a finished (or started) run's files first and train from scratch.

    Returns:
        `"new"`, `"resume"` (a started run to continue) or `"overwrite"`.

    Raises:
        RunDirectoryError: a finished run without `overwrite`.
    """
    for directory in (path, os.path.join(path, CHECKPOINT_DIR)):
        clean_temporaries(directory)
    if overwrite:
        removed = [name for name in RUN_ENTRIES if os.path.lexists(os.path.join(path, name))]
        for name in removed:
            entry = os.path.join(path, name)
            shutil.rmtree(entry) if os.path.isdir(entry) else os.remove(entry)
        return "overwrite" if removed else "new"
    finished = os.path.exists(os.path.join(path, MODEL_FILE)) and not os.path.isdir(os.path.join(path, CHECKPOINT_DIR))
    if finished:
        raise RunDirectoryError(f"{path}: holds a finished run ({MODEL_FILE}); pass --overwrite to train it again "
                                "from scratch, or choose another --output")
    return "resume" if os.path.exists(os.path.join(path, CONFIG_FILE)) else "new"


def read_run_config(path):
    """The `config.json` of a run directory as a dict, or `None` when it has none.

    Raises:
        RunDirectoryError: the file is there but not the JSON `train` writes.
    """
    config_path = os.path.join(path, CONFIG_FILE)
    if not os.path.exists(config_path):
        return None
    try:
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
        if not isinstance(config.get("model"), dict) or not isinstance(config.get("training"), dict):
            raise ValueError("expected {\"model\": {...}, \"training\": {...}}")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError) as error:
        raise RunDirectoryError(f"{config_path}: damaged or not written by keras-transformer train ({error}); "
                                "pass --overwrite to start the run afresh") from None
    return config


def check_resume_settings(path, model_config, training_config):
    """Refuses to resume a run with other model settings (or data/vocabulary settings) than it started with.

    Args:
        path: the run directory.
        model_config: the new run's model settings as a dict (all fields, vocabulary sizes excepted or equal).
        training_config: the new run's training settings as a dict (all fields).

    Raises:
        RunDirectoryError: naming the first setting that differs, with both values.
    """
    saved = read_run_config(path)
    if saved is None:
        return
    # The run a fine-tune started from first: resumed without it, every model setting would differ too.
    pairs = [("init_from", saved["training"].get("init_from"), training_config.get("init_from"))]
    pairs += [(name, saved["model"].get(name), value) for name, value in model_config.items()
              if not name.endswith("vocab_size")]
    pairs += [(name, saved["training"].get(name), training_config.get(name)) for name in RESUME_TRAINING_SETTINGS]
    for name, before, now in pairs:
        if before != now:
            raise RunDirectoryError(f"{path}: this run started with {name} = {before!r}, and this command asks for "
                                    f"{now!r}; resume with the same settings, or pass --overwrite to start afresh")


def init_from_settings(path, output_dir, model_settings, training_settings):
    """Checks a run directory to fine-tune from (`--init-from`) and returns the settings of the fine-tune.

    Reads `config.json` and file names only (no TensorFlow), so the command line checks before any work starts.
    The model settings are `path`'s, with the dropout rates asked for (`FINE_TUNE_OVERRIDABLE`); a model setting
    that contradicts `path`'s model, or a vocabulary setting its tokenizers (`vocab_size`, `shared_vocab`), is
    refused. The same value as `path`'s is accepted.

    Args:
        path: the run directory to start from (written by `train`, or imported from a pretrained checkpoint).
        output_dir: the new run directory (`--output`): another directory than `path`.
        model_settings: the model settings asked for, checked (as `check_settings` returns them).
        training_settings: the training settings asked for, checked.

    Returns:
        `(model_settings, training_settings)`: new dicts; the model's are complete but for the vocabulary sizes,
        the training's hold `path`'s `vocab_size` and `shared_vocab`, and for a multilingual `path` (M2M-100,
        NLLB-200) the language pair learned: `source_language` and `target_language`, as given or `path`'s defaults.

    Raises:
        RunDirectoryError: `path` missing, damaged (naming what) or the same directory as `output_dir`.
        SettingError: a setting that contradicts `path`'s (naming the flag and `path`'s value); a language code that
            `path` does not have (naming the closest), or any for a one-pair `path`; no target language for a
            multilingual `path` without a default.
    """
    if not os.path.isdir(path):
        raise RunDirectoryError(f"--init-from {path}: {'not a directory' if os.path.lexists(path) else 'not found'}; "
                                "expected a run directory (what keras-transformer train writes)")
    if os.path.realpath(path) == os.path.realpath(output_dir):
        raise RunDirectoryError(f"--init-from {path} is the --output directory; a fine-tune writes a new run: choose "
                                "another --output")
    for name in (MODEL_FILE, CONFIG_FILE, os.path.join(SOURCE_TOKENIZER, "tokenizer.json")):
        if not os.path.exists(os.path.join(path, name)):
            unfinished = name == MODEL_FILE and os.path.isdir(os.path.join(path, CHECKPOINT_DIR))
            raise RunDirectoryError(f"--init-from {path}: {name} is missing ("
                                    + ("the run has not finished: finish it first" if unfinished else
                                       "expected a finished run directory, as keras-transformer train writes")
                                    + ")")
    config_path = os.path.join(path, CONFIG_FILE)
    try:
        with open(config_path, encoding="utf-8") as f:
            saved = json.load(f)
        if not isinstance(saved, dict) or not isinstance(saved.get("model"), dict) or \
                not isinstance(saved.get("training", {}), dict):
            raise ValueError("expected {\"model\": {...}, \"training\": {...}}")
        model = {name: value for name, value in saved["model"].items() if not name.endswith("vocab_size")}
        unknown = sorted(set(model) - set(MODEL_RULES))
        if unknown:
            raise ValueError(f"unknown model setting {unknown[0]!r}")
        check_model(saved["model"])
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise RunDirectoryError(f"--init-from {path}: {config_path} is damaged or not a run's configuration "
                                f"({error})") from None
    for name, value in model_settings.items():
        if name not in FINE_TUNE_OVERRIDABLE and value != model.get(name):
            raise SettingError(f"{label(name)} = {value!r} contradicts the model of --init-from {path} "
                               f"({name} = {model.get(name)!r}), which a fine-tune keeps; of its model settings only "
                               + ", ".join(flag_of(n) for n in FINE_TUNE_OVERRIDABLE) + " may change")
    shared = not os.path.isdir(os.path.join(path, TARGET_TOKENIZER))
    vocabulary = {"shared_vocab": shared,
                  "vocab_size": saved.get("training", {}).get("vocab_size", saved["model"].get("tgt_vocab_size"))}
    for name, value in vocabulary.items():
        if name in training_settings and training_settings[name] != value:
            raise SettingError(f"{label(name)} = {training_settings[name]!r} contradicts the tokenizers "
                               f"of --init-from {path} ({name} = {value!r}), which a fine-tune keeps")
    pair = _language_pair(path, training_settings)
    return {**model, **model_settings}, {**training_settings, **vocabulary, **pair}


def refuse_language_pair(training_settings):
    """Refuses a language pair (`source_language`, `target_language`) for a run that is not a fine-tune."""
    for name in ("source_language", "target_language"):
        if training_settings.get(name) is not None:
            raise SettingError(f"{label(name)} = {training_settings[name]!r}: a language pair is chosen "
                               "when fine-tuning a multilingual run (--init-from); a new run learns its corpus' pair")


def _language_pair(path, training_settings):
    """`{"source_language", "target_language"}` of a fine-tune from the multilingual run `path` (the settings given,
    else its tokenizers' defaults), checked against its codes; `{}` for a one-pair run, which takes none."""
    given = {name: training_settings.get(name) for name in ("source_language", "target_language")}
    config = {}
    for directory in (SOURCE_TOKENIZER, TARGET_TOKENIZER):
        try:
            with open(os.path.join(path, directory, "tokenizer.json"), encoding="utf-8") as f:
                config[directory] = json.load(f)
        except (OSError, UnicodeDecodeError, ValueError):
            config[directory] = config.get(SOURCE_TOKENIZER, {})  # one tokenizer for both sides, or damaged
    codes = config[SOURCE_TOKENIZER].get("languages") if isinstance(config[SOURCE_TOKENIZER], dict) else None
    if not isinstance(codes, dict) or not codes:
        name = next((name for name, value in given.items() if value is not None), None)
        if name is not None:
            raise SettingError(f"{label(name)} = {given[name]!r}: --init-from {path} translates one "
                               "language pair; a fine-tune chooses its pair from a multilingual run (M2M-100, "
                               "NLLB-200) only")
        return {}
    defaults = {"source_language": config[SOURCE_TOKENIZER].get("source_language"),
                "target_language": config[TARGET_TOKENIZER].get("target_language")}
    pair = {}
    for name, value in given.items():
        value = defaults[name] if value is None else value
        if value is None:
            raise SettingError(f"{label(name)}: required to fine-tune the multilingual run --init-from "
                               f"{path}, the language it learns to translate into ({len(codes)} codes, such as "
                               f"{', '.join(list(codes)[:4])})")
        if value not in codes:
            closest = difflib.get_close_matches(str(value), list(codes), n=4, cutoff=0.0)
            raise SettingError(f"{label(name)} = {value!r}: unknown language code for --init-from "
                               f"{path}; closest: {', '.join(closest)} ({len(codes)} codes)")
        pair[name] = value
    return pair
