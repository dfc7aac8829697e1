"""Training: the masked label-smoothed loss, masked accuracy, the Transformer schedule, callbacks and plots.

Losses, metrics and the schedule use `keras.ops` only, so they work on every Keras backend.

Names load on first use (`keras_transformer.training.X`), so that the command line can check the
distribution settings, and pick the backend they need, before Keras is imported.
"""

import importlib

_LAZY = {
    "BestModelCheckpoint": "keras_transformer.training.model_checkpoints",
    "StopOnNonFiniteLoss": "keras_transformer.training.model_checkpoints",
    "LastModelCheckpoint": "keras_transformer.training.model_checkpoints",
    "FitCosineToBudget": "keras_transformer.training.callbacks",
    "HistoryLogger": "keras_transformer.training.callbacks",
    "TimeBudget": "keras_transformer.training.callbacks",
    "load_history": "keras_transformer.training.callbacks",
    "make_callbacks": "keras_transformer.training.callbacks",
    "MaskedSparseCategoricalCrossentropy": "keras_transformer.training.losses",
    "MaskedAccuracy": "keras_transformer.training.metrics",
    "plot_history": "keras_transformer.training.plots",
    "TransformerSchedule": "keras_transformer.training.schedule",
    "WarmupCosineDecay": "keras_transformer.training.schedule",
    "make_optimizer": "keras_transformer.training.schedule",
    "make_schedule": "keras_transformer.training.schedule",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'keras_transformer.training' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
