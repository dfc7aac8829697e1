"""One training run, from a parallel corpus to a run directory with the model and its tokenizers.

A run directory holds everything `translate`, `evaluate` and `export` need:

    run_dir/
      model.keras             the trained model (checkpoint-averaged if asked)
      config.json             {"model": TransformerConfig, "training": TrainingConfig}
      tokenizers/source/      SubwordTokenizer (tokenizers/target/ too unless the vocabulary is shared)
      history.json/.csv/.png  per-epoch metrics and a plot of the training curves
      best.keras, last.keras  checkpoints; backup/ while a run is in progress (resume by re-running)
      logs/                   TensorBoard
"""

import dataclasses
import json
import os
import time

import keras
import numpy as np

from keras_transformer.data import make_dataset, train_tokenizers
from keras_transformer.data.corpus import as_corpus
from keras_transformer.data.pipeline import with_batch_count
from keras_transformer.data.tokenizer import SubwordTokenizer
from keras_transformer.models import TransformerConfig
from keras_transformer.training.callbacks import load_history
from keras_transformer.training.callbacks import make_callbacks
from keras_transformer.training.losses import MaskedSparseCategoricalCrossentropy
from keras_transformer.training.metrics import MaskedAccuracy
from keras_transformer.training.plots import plot_history
from keras_transformer.training.schedule import SCHEDULES
from keras_transformer.training.schedule import make_optimizer
from keras_transformer.training.schedule import make_schedule


@dataclasses.dataclass
class TrainingConfig:
    """Settings of a training run other than the model's architecture."""

    epochs: int = 10
    batch_size: int = 64
    token_budget: int | None = None
    vocab_size: int = 8000
    shared_vocab: bool = False
    warmup_steps: int = 4000
    lr_scale: float = 1.0
    decay: str = "inverse_sqrt"
    label_smoothing: float = 0.1
    clipnorm: float | None = None
    patience: int | None = None
    average_last: int = 1
    seed: int = 0
    jit_compile: bool = True
    max_words: int | None = None
    steps_per_epoch: int | None = None
    max_minutes: float | None = None


MODEL_FIELDS = {f.name for f in dataclasses.fields(TransformerConfig)} - {"src_vocab_size", "tgt_vocab_size"}
TRAINING_FIELDS = {f.name for f in dataclasses.fields(TrainingConfig)}


def split_settings(settings):
    """Split a flat settings dict (CLI flags or a config file) into model and training settings."""
    settings = {k.replace("-", "_"): v for k, v in settings.items() if v is not None}
    unknown = sorted(set(settings) - MODEL_FIELDS - TRAINING_FIELDS)
    if unknown:
        raise ValueError(
            f"Unknown settings {unknown}. Model settings: {sorted(MODEL_FIELDS)}; "
            f"training settings: {sorted(TRAINING_FIELDS)}."
        )
    model = {k: v for k, v in settings.items() if k in MODEL_FIELDS}
    training = {k: v for k, v in settings.items() if k in TRAINING_FIELDS}
    return model, training


def load_settings_file(path):
    """Read a flat settings file, JSON (`.json`) or YAML (`.yaml`/`.yml`)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        if path.endswith((".yaml", ".yml")):
            import yaml

            values = yaml.safe_load(text) or {}
        else:
            values = json.loads(text)
    except Exception as error:  # noqa: BLE001 - reported with the file name
        raise ValueError(f"{path}: not a valid {'YAML' if path.endswith(('.yaml', '.yml')) else 'JSON'} file: {error}") from None
    if not isinstance(values, dict):
        raise ValueError(f"{path}: expected a mapping of setting names to values, got {type(values).__name__}.")
    return values


class WeightAveraging(keras.callbacks.Callback):
    """Keep the weights of the last `count` epochs and load their average when training ends.

    Averaging the last checkpoints is a cheap, reliable BLEU gain for Transformers
    (Vaswani et al., 2017, section 6.1; Popel and Bojar, 2018).
    """

    def __init__(self, count):
        super().__init__()
        self.count = count
        self.snapshots = []

    def on_epoch_end(self, epoch, logs=None):
        self.snapshots.append([np.array(w) for w in self.model.get_weights()])
        self.snapshots = self.snapshots[-self.count:]

    def on_train_end(self, logs=None):
        if len(self.snapshots) > 1:
            averaged = [np.mean(ws, axis=0).astype(ws[0].dtype) for ws in zip(*self.snapshots)]
            self.model.set_weights(averaged)


@dataclasses.dataclass
class Run:
    """A trained model with its tokenizers and configuration (what a run directory holds)."""

    model: keras.Model
    source_tokenizer: SubwordTokenizer
    target_tokenizer: SubwordTokenizer
    model_config: TransformerConfig
    training_config: TrainingConfig
    directory: str | None = None


def compile_model(model, model_config, training_config, schedule):
    model.compile(
        optimizer=make_optimizer(clipnorm=training_config.clipnorm, schedule=schedule),
        loss=MaskedSparseCategoricalCrossentropy(label_smoothing=training_config.label_smoothing),
        metrics=[MaskedAccuracy()],
        jit_compile=training_config.jit_compile,
    )
    return model


def _save_tokenizers(directory, source, target):
    source.save(os.path.join(directory, "tokenizers", "source"))
    if target is not source:
        target.save(os.path.join(directory, "tokenizers", "target"))


def load_tokenizers(directory):
    source = SubwordTokenizer.load(os.path.join(directory, "tokenizers", "source"))
    target_dir = os.path.join(directory, "tokenizers", "target")
    target = SubwordTokenizer.load(target_dir) if os.path.isdir(target_dir) else source
    return source, target


def train(
    train_data,
    output_dir,
    val_data=None,
    model_settings=None,
    training_settings=None,
    verbose=1,
):
    """Train tokenizers and a Transformer on a parallel corpus and write a run directory.

    Re-running the same call on the same `output_dir` after an interruption resumes: the saved
    tokenizers are reused and `BackupAndRestore` restores weights, optimizer and epoch.

    Args:
        train_data: a `ParallelCorpus`, `(sources, targets)` lists or a `tf.data.Dataset` of string pairs.
        output_dir: the run directory (created).
        val_data: optional validation pairs in the same forms.
        model_settings: dict of `TransformerConfig` fields (vocabulary sizes come from the tokenizers).
        training_settings: dict of `TrainingConfig` fields.
        verbose: 0 silent, 1 progress bars and summaries, 2 one line per epoch.

    Returns:
        A `Run`.
    """
    training_config = TrainingConfig(**(training_settings or {}))
    if training_config.decay not in SCHEDULES:
        raise ValueError(f"Unknown learning-rate decay {training_config.decay!r}: expected one of {SCHEDULES}.")
    model_settings = dict(model_settings or {})
    os.makedirs(output_dir, exist_ok=True)
    keras.utils.set_random_seed(training_config.seed)

    corpus = as_corpus(train_data, max_words=training_config.max_words)
    if verbose:
        print(corpus.summary())
    val_corpus = as_corpus(val_data) if val_data is not None else None

    tokenizer_dir = os.path.join(output_dir, "tokenizers", "source")
    if os.path.isdir(tokenizer_dir):
        source_tokenizer, target_tokenizer = load_tokenizers(output_dir)
        if verbose:
            print(f"Reusing the tokenizers saved in {output_dir}/tokenizers (resuming)")
    else:
        start = time.time()
        source_tokenizer, target_tokenizer = train_tokenizers(
            corpus, vocab_size=training_config.vocab_size, shared=training_config.shared_vocab, verbose=verbose
        )
        _save_tokenizers(output_dir, source_tokenizer, target_tokenizer)
        if verbose:
            print(f"Tokenizers trained in {time.time() - start:.1f} s")

    shared = source_tokenizer is target_tokenizer
    if model_settings.get("share_embeddings") and not shared:
        raise ValueError("share_embeddings needs a shared vocabulary: set shared_vocab too.")
    model_config = TransformerConfig(
        src_vocab_size=source_tokenizer.vocab_size,
        tgt_vocab_size=target_tokenizer.vocab_size,
        **model_settings,
    )
    with open(os.path.join(output_dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump({"model": model_config.to_dict(), "training": dataclasses.asdict(training_config)}, f, indent=2)

    dataset_args = dict(
        batch_size=training_config.batch_size,
        max_length=model_config.max_length,
        token_budget=training_config.token_budget,
    )
    if training_config.jit_compile:
        # One shape per length bucket (and full batches only in training): XLA compiles the train step once
        # per bucket instead of once per (batch, source, target) shape.
        dataset_args["same_length"] = True
    train_ds = make_dataset(corpus, source_tokenizer, target_tokenizer, seed=training_config.seed,
                            drop_remainder=bool(training_config.jit_compile) and len(corpus) >= 4 * training_config.batch_size,
                            **dataset_args)
    val_ds = (
        make_dataset(val_corpus, source_tokenizer, target_tokenizer, shuffle=False, **dataset_args)
        if val_corpus is not None
        else None
    )
    if training_config.steps_per_epoch:
        train_ds = train_ds.repeat()
        steps = training_config.steps_per_epoch
    else:
        # A known epoch length: the first epoch's progress bar gets its total, and the cosine decay its last step.
        train_ds, steps = with_batch_count(train_ds)
    if val_ds is not None:
        val_ds, _ = with_batch_count(val_ds)

    total_steps = None
    if training_config.decay == "cosine":
        # The cosine decay ends at the last step of the last epoch (with a time budget, of the last epoch that
        # fits: FitCosineToBudget below moves the horizon).
        total_steps = steps * training_config.epochs
        if verbose:
            print(f"Cosine learning-rate decay over {training_config.epochs} epochs x {steps} steps"
                  + (" (or the epochs that fit the time budget)" if training_config.max_minutes else ""))
    schedule = make_schedule(model_config.d_model, training_config.warmup_steps, training_config.lr_scale,
                             decay=training_config.decay, total_steps=total_steps)
    model = compile_model(model_config.build(), model_config, training_config, schedule)
    if verbose:
        print(f"Model: {model.count_params():,} parameters, {model_config.num_layers} layers, d_model "
              f"{model_config.d_model}; training {training_config.epochs} epochs")
    callbacks = make_callbacks(
        output_dir,
        patience=training_config.patience,
        monitor="val_loss" if val_ds is not None else "loss",
        max_minutes=training_config.max_minutes,
        # With a time budget, the cosine decay ends with the last epoch that fits it (FitCosineToBudget).
        cosine_schedule=schedule if training_config.decay == "cosine" else None,
        steps_per_epoch=steps,
        max_epochs=training_config.epochs,
    )
    if training_config.average_last > 1:
        callbacks.append(WeightAveraging(training_config.average_last))
    start = time.time()
    model.fit(
        train_ds,
        validation_data=val_ds,
        epochs=training_config.epochs,
        steps_per_epoch=training_config.steps_per_epoch,
        callbacks=callbacks,
        shuffle=False,  # the tf.data pipeline shuffles
        verbose=verbose,
    )
    elapsed = time.time() - start
    model.save(os.path.join(output_dir, "model.keras"))
    history_path = os.path.join(output_dir, "history.json")
    if os.path.exists(history_path):
        plot_history(load_history(history_path), os.path.join(output_dir, "history.png"))
    if verbose:
        print(f"Trained in {elapsed:.0f} s; wrote {output_dir}/model.keras, tokenizers/, config.json, history.*")
    return Run(model, source_tokenizer, target_tokenizer, model_config, training_config, output_dir)


def load_run(directory):
    """Load a run directory written by `train` (the model, its tokenizers and configuration)."""
    model_path = os.path.join(directory, "model.keras")
    config_path = os.path.join(directory, "config.json")
    for path in (model_path, config_path, os.path.join(directory, "tokenizers", "source")):
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"{directory} is not a keras-transformer run directory: {path} is missing "
                "(expected what `keras-transformer train` writes)."
            )
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    import keras_transformer.training  # noqa: F401 (registers the loss and metric for loading)

    model = keras.saving.load_model(model_path, compile=False)
    source, target = load_tokenizers(directory)
    return Run(
        model,
        source,
        target,
        TransformerConfig.from_dict(config["model"]),
        TrainingConfig(**config["training"]),
        directory,
    )
