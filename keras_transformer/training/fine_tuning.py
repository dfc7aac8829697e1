"""Fine-tuning: a run that starts from another run's weights, tokenizers and model (`train(init_from=DIR)`).

The schedule suits a model that has already learned: a short linear warm-up (`FINE_TUNE_WARMUP_STEPS`) to a small
peak learning rate (`FINE_TUNE_PEAK_LEARNING_RATE`, for Adam), then the run's decay (the paper's inverse square root
by default). These apply to the settings not given: an explicit `warmup_steps`, `lr_scale` or `decay` wins.
"""

import math

import numpy as np

from keras_transformer.runs.directory import init_from_settings

FINE_TUNE_WARMUP_STEPS = 400
FINE_TUNE_PEAK_LEARNING_RATE = 1e-4


def fine_tuning_settings(init_from, output_dir, model_settings, training_settings):
    """The model and training settings of a fine-tune from the run directory `init_from`.

    The model settings are `init_from`'s (the dropout rates may change), the vocabulary settings its tokenizers',
    and the learning-rate schedule the fine-tuning one where `warmup_steps` and `lr_scale` are not given: warm-up
    over `FINE_TUNE_WARMUP_STEPS` steps, and an `lr_scale` that puts the peak at `FINE_TUNE_PEAK_LEARNING_RATE`
    (the schedule's peak is `lr_scale * (d_model * warmup_steps)**-0.5`).

    Raises:
        RunDirectoryError, SettingError: see `keras_transformer.runs.directory.init_from_settings`.

    Example (`run_dir` is a directory written by `train`, with `d_model` 32):

    >>> model, training = fine_tuning_settings(run_dir, "fine-tuned", {"dropout": 0.3}, {"epochs": 2})
    >>> model["d_model"], model["dropout"], training["warmup_steps"], round(training["lr_scale"], 6)
    (32, 0.3, 400, 0.011314)
    """
    model_settings, training_settings = init_from_settings(init_from, output_dir, model_settings, training_settings)
    training_settings.setdefault("warmup_steps", FINE_TUNE_WARMUP_STEPS)
    if "lr_scale" not in training_settings and training_settings["warmup_steps"] > 0:
        training_settings["lr_scale"] = FINE_TUNE_PEAK_LEARNING_RATE * math.sqrt(
            model_settings["d_model"] * training_settings["warmup_steps"])
    return model_settings, training_settings


def fine_tuning_tokenizers(initial, training_config):
    """`(source tokenizer, target tokenizer)` of a fine-tune from the run `initial`: its own, with the language pair
    learned (`training_config.source_language` / `target_language`) as their defaults where it is multilingual, so
    that the data pipeline lays out `[source language] X </s>` -> `[target language] Y </s>` and the fine-tuned run
    translates that pair unless told otherwise."""
    source, target = initial.source_tokenizer, initial.target_tokenizer
    if training_config.target_language is None:
        return source, target
    both = source is target  # one tokenizer for both sides (an imported checkpoint's): one copy keeps it so
    source = source.with_source_language(training_config.source_language)
    target = (source if both else target).with_target_language(training_config.target_language)
    return (target if both else source), target


def describe_fine_tuning(d_model, training_config):
    """One line: the run fine-tuned from, and its schedule (the peak learning rate, at the end of the warm-up)."""
    peak = training_config.lr_scale * (d_model * max(training_config.warmup_steps, 1)) ** -0.5
    return (f"Fine-tuning from {training_config.init_from} (its weights, tokenizers and model settings): warm-up over "
            f"{training_config.warmup_steps} steps to a peak learning rate of {peak:.2g}, then "
            f"{training_config.decay.replace('_', ' ')} decay")


def copy_weights(model, initial, init_from):
    """Loads the weights of `initial` (the `init_from` run's model) into `model`, built from the same settings.

    Raises:
        ValueError: the two models do not have the same weights (naming `init_from` and the first that differs).
    """
    ours, theirs = model.weights, initial.weights
    if len(ours) != len(theirs):
        raise ValueError(f"--init-from {init_from}: its model.keras has {len(theirs)} weights, and a model built from "
                         f"its config.json {len(ours)}: the two do not describe the same model")
    for mine, other in zip(ours, theirs):
        if tuple(mine.shape) != tuple(other.shape):
            raise ValueError(f"--init-from {init_from}: its model.keras has {other.path} of shape "
                             f"{tuple(other.shape)}, and a model built from its config.json {tuple(mine.shape)}")
    model.set_weights([np.asarray(w) for w in initial.get_weights()])
