"""Training: the masked label-smoothed loss, masked accuracy, the Transformer schedule, callbacks and plots.

Losses, metrics and the schedule use `keras.ops` only, so they work on every Keras backend.
"""

from keras_transformer.training.callbacks import BestModelCheckpoint
from keras_transformer.training.callbacks import FitCosineToBudget
from keras_transformer.training.callbacks import HistoryLogger
from keras_transformer.training.callbacks import TimeBudget
from keras_transformer.training.callbacks import load_history
from keras_transformer.training.callbacks import make_callbacks
from keras_transformer.training.losses import MaskedSparseCategoricalCrossentropy
from keras_transformer.training.metrics import MaskedAccuracy
from keras_transformer.training.plots import plot_history
from keras_transformer.training.schedule import TransformerSchedule
from keras_transformer.training.schedule import WarmupCosineDecay
from keras_transformer.training.schedule import make_optimizer
from keras_transformer.training.schedule import make_schedule

__all__ = [
    "BestModelCheckpoint",
    "FitCosineToBudget",
    "HistoryLogger",
    "MaskedAccuracy",
    "MaskedSparseCategoricalCrossentropy",
    "TimeBudget",
    "TransformerSchedule",
    "WarmupCosineDecay",
    "load_history",
    "make_callbacks",
    "make_optimizer",
    "make_schedule",
    "plot_history",
]
