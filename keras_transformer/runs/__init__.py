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

from keras_transformer.lazy import lazy_names

_EXPORTS = {
    "keras_transformer.runs.layout": ("CHECKPOINT_DIR", "DEFAULT_SAVED_MODELS"),
    "keras_transformer.runs.config": ("TrainingConfig",),
    "keras_transformer.runs.run": (
        "Run", "RunFileError", "load_run", "load_tokenizers", "save_tokenizers", "read_decoding_settings",
        "write_decoding_settings",
    ),
    "keras_transformer.runs.directory": ("RunDirectoryError",),
    "keras_transformer.runs.checkpoint": (
        "ResumeError", "ResumableCheckpoint", "TrainingDivergedError", "load_checkpoint_state", "remove_checkpoint",
        "restore_checkpoint",
    ),
    "keras_transformer.runs.ensemble": ("Ensemble", "load_ensemble", "write_ensemble"),
    "keras_transformer.runs.lock": ("RunLock", "RunLockedError"),
}

__all__, __getattr__, __dir__ = lazy_names(__name__, _EXPORTS)
