"""The run directory: what `train` writes, how it resumes, who may write it, how it is read back.

* `layout`: the names of what is in a run directory, and the default export destination.
* `config`: `TrainingConfig` (the run's training settings, `config.json`'s "training").
* `ensemble`: an ensemble directory, several runs decoded as one (`Ensemble`, `write_ensemble`, `load_ensemble`).
* `run`: `Run`, `load_run`, and saving/loading the model, the tokenizers, `config.json` and `decoding.json`.
* `directory`: whether `train` may write a directory, resume it or (with `overwrite`) start it afresh.
* `checkpoint`: resumable mid-epoch checkpoints (`checkpoint/` in a run directory while training runs).
* `lock`: one writer per run directory (`RunLock`).

Names load on first use (the top level's lazy table), so that the command line reads `layout` without importing
Keras: every `keras_transformer.runs.X` import runs this file first.
"""

import importlib

_LAZY = {
    "CHECKPOINT_DIR": ("keras_transformer.runs.layout", "CHECKPOINT_DIR"),
    "DEFAULT_SAVED_MODELS": ("keras_transformer.runs.layout", "DEFAULT_SAVED_MODELS"),
    "TrainingConfig": ("keras_transformer.runs.config", "TrainingConfig"),
    "Run": ("keras_transformer.runs.run", "Run"),
    "RunFileError": ("keras_transformer.runs.run", "RunFileError"),
    "load_run": ("keras_transformer.runs.run", "load_run"),
    "load_tokenizers": ("keras_transformer.runs.run", "load_tokenizers"),
    "save_tokenizers": ("keras_transformer.runs.run", "save_tokenizers"),
    "read_decoding_settings": ("keras_transformer.runs.run", "read_decoding_settings"),
    "write_decoding_settings": ("keras_transformer.runs.run", "write_decoding_settings"),
    "RunDirectoryError": ("keras_transformer.runs.directory", "RunDirectoryError"),
    "ResumeError": ("keras_transformer.runs.checkpoint", "ResumeError"),
    "ResumableCheckpoint": ("keras_transformer.runs.checkpoint", "ResumableCheckpoint"),
    "TrainingDivergedError": ("keras_transformer.runs.checkpoint", "TrainingDivergedError"),
    "load_checkpoint_state": ("keras_transformer.runs.checkpoint", "load_checkpoint_state"),
    "remove_checkpoint": ("keras_transformer.runs.checkpoint", "remove_checkpoint"),
    "restore_checkpoint": ("keras_transformer.runs.checkpoint", "restore_checkpoint"),
    "Ensemble": ("keras_transformer.runs.ensemble", "Ensemble"),
    "load_ensemble": ("keras_transformer.runs.ensemble", "load_ensemble"),
    "write_ensemble": ("keras_transformer.runs.ensemble", "write_ensemble"),
    "RunLock": ("keras_transformer.runs.lock", "RunLock"),
    "RunLockedError": ("keras_transformer.runs.lock", "RunLockedError"),
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'keras_transformer.runs' has no attribute {name!r}")
    module_name, attribute = _LAZY[name]
    value = getattr(importlib.import_module(module_name), attribute)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
