"""A run directory as an object: `Run` (model, tokenizers, configuration), `load_run`, and the tokenizers' save/load.

The layout is in `keras_transformer.runs.layout`; `train` (keras_transformer.training) writes it, `translate`,
`evaluate` and `export` read it through `load_run`.
"""

import dataclasses
import json
import os

import keras

import keras_transformer.models.transformer  # noqa: F401  (registers the classes model.keras names)
from keras_transformer.atomic import atomic_path
from keras_transformer.atomic import write_json
from keras_transformer.data.tokenizer import SubwordTokenizer
from keras_transformer.data.tokenizers import load_tokenizer
from keras_transformer.decoding.tuning import DecodingSettings
from keras_transformer.models import TransformerConfig
from keras_transformer.runs.config import TrainingConfig
from keras_transformer.runs.directory import read_run_config
from keras_transformer.runs.layout import CONFIG_FILE
from keras_transformer.runs.layout import DECODING_FILE
from keras_transformer.runs.layout import MODEL_FILE
from keras_transformer.runs.layout import SOURCE_TOKENIZER
from keras_transformer.runs.layout import TARGET_TOKENIZER
from keras_transformer.runs.layout import TOKENIZERS_DIR


@dataclasses.dataclass
class Run:
    """A trained model with its tokenizers and configuration (what a run directory holds).

    Example (`run_dir` is a directory written by `train`):

    >>> run = load_run(run_dir)
    >>> run.model_config.num_layers, run.source_tokenizer.vocab_size == run.model_config.src_vocab_size
    (1, True)
    """

    model: keras.Model
    source_tokenizer: SubwordTokenizer  # or a SentencePieceTokenizer (an imported checkpoint): the same interface
    target_tokenizer: SubwordTokenizer
    model_config: TransformerConfig
    training_config: TrainingConfig
    directory: str | None = None
    decoding: DecodingSettings | None = None  # `decoding.json`: chosen on a held-out set by `keras-transformer tune`


def save_tokenizers(directory, source, target):
    """Writes `tokenizers/source` (and `tokenizers/target` unless it is the same tokenizer) into a run directory.

    Both go into a temporary directory renamed into place: a run killed while saving them has either no
    `tokenizers/` (and trains them again) or a complete one.
    """
    with atomic_path(os.path.join(directory, TOKENIZERS_DIR)) as temporary:
        source.save(os.path.join(temporary, os.path.basename(SOURCE_TOKENIZER)))
        if target is not source:
            target.save(os.path.join(temporary, os.path.basename(TARGET_TOKENIZER)))


def load_tokenizers(directory):
    """`(source, target)` tokenizers of a run directory (the same object twice for a shared vocabulary)."""
    source = load_tokenizer(os.path.join(directory, SOURCE_TOKENIZER))
    target_dir = os.path.join(directory, TARGET_TOKENIZER)
    target = load_tokenizer(target_dir) if os.path.isdir(target_dir) else source
    return source, target


def write_run_config(directory, model_config, training_config, data=None):
    """Writes `config.json` (atomically): the model's and the training's settings, and with `data` what the
    training data held (pairs read, and skipped: a blank side, a line too long, over `max_length`)."""
    config = {"model": model_config.to_dict(), "training": dataclasses.asdict(training_config)}
    write_json(os.path.join(directory, CONFIG_FILE), config if data is None else {**config, "data": data})


def save_model(model, directory):
    """Saves `model.keras` into a run directory atomically (the old file or the new one, never half)."""
    with atomic_path(os.path.join(directory, MODEL_FILE)) as temporary:
        model.save(temporary)


class RunFileError(ValueError):
    """A file of a run directory that is there but cannot be read (the message names it)."""


def write_decoding_settings(directory, settings, overwrite=False):
    """Writes `decoding.json` (a `DecodingSettings`) into a run directory, atomically.

    Raises:
        FileExistsError: the run already has one and `overwrite` is false.
    """
    path = os.path.join(directory, DECODING_FILE)
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path}: exists (decoding chosen earlier: {read_decoding_settings(directory).describe()}"
                              "); pass --overwrite to replace it")
    write_json(path, settings.to_dict())
    return path


def read_decoding_settings(directory):
    """The run's `DecodingSettings` (from `decoding.json`), or `None` when it has none.

    Raises:
        RunFileError: the file is there but damaged (naming it).
    """
    path = os.path.join(directory, DECODING_FILE)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return DecodingSettings.from_dict(json.load(f))
    except (OSError, UnicodeDecodeError, ValueError, TypeError, AttributeError) as error:
        raise RunFileError(f"{path}: damaged or not written by keras-transformer tune ({error}); run tune again "
                           "with --overwrite, or remove it") from None


def load_run(directory):
    """Loads a run directory written by `train` (the model, its tokenizers and configuration) as a `Run`.

    Raises:
        FileNotFoundError: the directory is not a run directory (naming what is missing).
        RunFileError, RunDirectoryError: a file is there but damaged (naming it).

    Example (`run_dir` is a directory written by `train`):

    >>> run = load_run(run_dir)
    >>> sorted(run.model.input)
    ['decoder_inputs', 'encoder_inputs']
    """
    model_path = os.path.join(directory, MODEL_FILE)
    config_path = os.path.join(directory, CONFIG_FILE)
    for path in (model_path, config_path, os.path.join(directory, SOURCE_TOKENIZER)):
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"{directory} is not a keras-transformer run directory: {path} is missing "
                "(expected what `keras-transformer train` writes)."
            )
    config = read_run_config(directory)
    try:
        model = keras.saving.load_model(model_path, compile=False)
    except Exception as error:  # noqa: BLE001 - zip, HDF5 and Keras errors alike mean a damaged file
        text = str(error).strip().splitlines()
        raise RunFileError(f"{model_path}: cannot be loaded (damaged or truncated?): {type(error).__name__}: "
                           f"{text[0][:200] if text else ''}") from None
    source, target = load_tokenizers(directory)
    return Run(
        model,
        source,
        target,
        TransformerConfig.from_dict(config["model"]),
        TrainingConfig(**config["training"]),
        directory,
        read_decoding_settings(directory),
    )
