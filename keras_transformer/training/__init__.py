"""Training: the masked label-smoothed loss, masked accuracy, the Transformer schedule, callbacks and plots.

Losses, metrics and the schedule use `keras.ops` only, so they work on every Keras backend.

Names load on first use (`keras_transformer.training.X`), so that the command line can check the
distribution settings, and pick the backend they need, before Keras is imported.
"""

from keras_transformer.lazy import lazy_names

_EXPORTS = {
    "keras_transformer.training.model_checkpoints": (
        "BestModelCheckpoint", "StopOnNonFiniteLoss", "LastModelCheckpoint",
    ),
    "keras_transformer.training.callbacks": (
        "FitCosineToBudget", "HistoryLogger", "TimeBudget", "load_history", "make_callbacks",
    ),
    "keras_transformer.training.losses": ("MaskedSparseCategoricalCrossentropy",),
    "keras_transformer.training.metrics": ("MaskedAccuracy",),
    "keras_transformer.training.plots": ("plot_history",),
    "keras_transformer.training.schedule": (
        "TransformerSchedule", "WarmupCosineDecay", "make_optimizer", "make_schedule",
    ),
}

__all__, __getattr__, __dir__ = lazy_names(__name__, _EXPORTS)
