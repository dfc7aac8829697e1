"""The run directory: what `train` writes, how it resumes, who may write it.

* `checkpoint`: resumable mid-epoch checkpoints (`checkpoint/` in a run directory while training runs).
* `lock`: one writer per run directory (`RunLock`).
* `directory`: whether `train` may write a directory, resume it or (with `overwrite`) start it afresh.
"""

from keras_transformer.runs.checkpoint import CHECKPOINT_DIR
from keras_transformer.runs.checkpoint import CheckpointError
from keras_transformer.runs.checkpoint import ResumableCheckpoint
from keras_transformer.runs.checkpoint import TrainingDivergedError
from keras_transformer.runs.checkpoint import load_checkpoint_state
from keras_transformer.runs.checkpoint import remove_checkpoint
from keras_transformer.runs.checkpoint import restore_checkpoint
from keras_transformer.runs.lock import RunLock
from keras_transformer.runs.lock import RunLockedError

__all__ = [
    "CHECKPOINT_DIR",
    "CheckpointError",
    "ResumableCheckpoint",
    "TrainingDivergedError",
    "RunLock",
    "RunLockedError",
    "load_checkpoint_state",
    "remove_checkpoint",
    "restore_checkpoint",
]
