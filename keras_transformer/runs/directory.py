"""The run directory: what is in it, whether `train` may write it, and what `--overwrite` removes.

`check_output_path` and `prepare_run_directory` run before any work starts. They refuse, with one clear line:

* an `--output` that is a file, or a non-empty directory that is not a run directory (nothing of the user's is
  ever written over);
* a finished run (its `model.keras` is there and no checkpoint is left to resume) unless `overwrite`;
* a run that started with other settings than this call asks for (resuming it would mix two models).

It removes what a killed process left half-written (`keras_transformer.atomic.clean_temporaries`).
"""

import json
import os
import shutil

from keras_transformer.atomic import clean_temporaries
from keras_transformer.runs.layout import CHECKPOINT_DIR
from keras_transformer.runs.layout import CONFIG_FILE
from keras_transformer.runs.layout import LOCK_FILE
from keras_transformer.runs.layout import MODEL_FILE
from keras_transformer.runs.layout import RUN_ENTRIES
# Training settings that a resumed run must share with the run it continues (the model settings all must).
RESUME_TRAINING_SETTINGS = ("vocab_size", "shared_vocab", "batch_size", "token_budget", "max_words", "seed",
                            "vocab_sample")


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
    pairs = [(name, saved["model"].get(name), value) for name, value in model_config.items()
             if not name.endswith("vocab_size")]
    pairs += [(name, saved["training"].get(name), training_config.get(name)) for name in RESUME_TRAINING_SETTINGS]
    for name, before, now in pairs:
        if before != now:
            raise RunDirectoryError(f"{path}: this run started with {name} = {before!r}, and this command asks for "
                                    f"{now!r}; resume with the same settings, or pass --overwrite to start afresh")
