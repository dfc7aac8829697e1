"""`TrainingConfig`: the settings of a training run other than the model's architecture (`config.json`'s "training").

It lives with the run directory because a run records it, and `load_run` reads it back; `train` takes it.
"""

import dataclasses

from keras_transformer.validation import check_training


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

    epochs: int = 10
    batch_size: int = 64
    token_budget: int | None = None
    vocab_size: int = 8000
    shared_vocab: bool = False
    warmup_steps: int = 4000
    lr_scale: float = 1.0
    decay: str = "inverse_sqrt"
    label_smoothing: float = 0.1
    rdrop: float = 0.0
    clipnorm: float | None = None
    patience: int | None = None
    average_last: int = 1
    seed: int = 0
    jit_compile: bool = True
    max_words: int | None = None
    steps_per_epoch: int | None = None
    max_minutes: float | None = None
    checkpoint_every: int | None = None
    vocab_sample: int = 200_000
    shuffle_buffer: int = 100_000
    init_from: str | None = None  # the run a fine-tune started from (absolute path; `train(init_from=...)`)
    source_language: str | None = None  # a fine-tune of a multilingual run: the language pair it learns
    target_language: str | None = None

    def __post_init__(self):
        check_training(dataclasses.asdict(self))
