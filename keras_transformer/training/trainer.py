"""`train`: one training run, from a parallel corpus to a run directory (`keras_transformer.runs.layout`).

Re-running the same call resumes an interrupted run; `Run`, `load_run` and `TrainingConfig` live in
`keras_transformer.runs`.
"""

import contextlib
import ctypes
import dataclasses
import gc
import os
import shutil
import tempfile
import time
import warnings

import keras

from keras_transformer.data import train_tokenizers
from keras_transformer.data.pipeline import with_known_length
from keras_transformer.data.streaming import pairs_source
from keras_transformer.models import TransformerConfig
from keras_transformer.models import TransformerModel
from keras_transformer.runs import ResumableCheckpoint
from keras_transformer.runs import RunLock
from keras_transformer.runs import TrainingDivergedError
from keras_transformer.runs import load_checkpoint_state
from keras_transformer.runs import remove_checkpoint
from keras_transformer.runs import restore_checkpoint
from keras_transformer.runs.config import TrainingConfig
from keras_transformer.runs.config import check_settings
from keras_transformer.runs.directory import check_output_path
from keras_transformer.runs.directory import check_resume_settings
from keras_transformer.runs.directory import prepare_run_directory
from keras_transformer.runs.directory import read_run_config
from keras_transformer.runs.directory import refuse_language_pair
from keras_transformer.runs.layout import MODEL_FILE
from keras_transformer.runs.run import Run
from keras_transformer.runs.run import load_run
from keras_transformer.runs.run import load_tokenizers
from keras_transformer.runs.run import save_model
from keras_transformer.runs.run import save_tokenizers
from keras_transformer.runs.run import write_run_config
from keras_transformer.training.callbacks import load_history
from keras_transformer.training.callbacks import make_callbacks
from keras_transformer.training.callbacks import read_records
from keras_transformer.training.datasets import training_data
from keras_transformer.training.distribution import DistributionConfig
from keras_transformer.training.distribution import check_mirrored_jit_compile
from keras_transformer.training.distribution import setup_distribution
from keras_transformer.training.final_weights import FinalWeights
from keras_transformer.training.fine_tuning import copy_weights
from keras_transformer.training.fine_tuning import describe_fine_tuning
from keras_transformer.training.fine_tuning import fine_tuning_settings
from keras_transformer.training.fine_tuning import fine_tuning_tokenizers
from keras_transformer.training.losses import MaskedSparseCategoricalCrossentropy
from keras_transformer.training.metrics import MaskedAccuracy
from keras_transformer.training.model_checkpoints import StopOnNonFiniteLoss
from keras_transformer.training.plots import plot_history
from keras_transformer.training.schedule import make_optimizer
from keras_transformer.training.schedule import make_schedule


def compile_model(model, model_config, training_config, schedule, jit_compile=True):
    """Compiles `model` for training; `jit_compile=False` (a distribution without XLA) overrides the config's."""
    model.compile(
        optimizer=make_optimizer(clipnorm=training_config.clipnorm, schedule=schedule),
        loss=MaskedSparseCategoricalCrossentropy(label_smoothing=training_config.label_smoothing,
                                                 rdrop=training_config.rdrop),
        metrics=[MaskedAccuracy()],
        jit_compile=training_config.jit_compile and jit_compile,
    )
    # The optimizer's variables (Adam's moments) now, not in the first trace of the train step: a `tf.function`
    # whose first trace creates variables is traced a second time, which doubled the time to the first step.
    model.optimizer.build(model.trainable_variables)
    return model


def train(train_data, output_dir, val_data=None, model_settings=None, training_settings=None, verbose=1,
          distribution=None, callbacks=None, overwrite=False, init_from=None):
    """Train tokenizers and a Transformer on a parallel corpus and write a run directory.

    Re-running the same call on the same `output_dir` after an interruption resumes from the last checkpoint (each
    epoch end, and every `checkpoint_every` batches): tokenizers, weights, optimizer state and data position.

    Args:
        train_data: a `CorpusScan` of files (`scan_corpus`: streamed, bounded memory), a `ParallelCorpus`,
            `(sources, targets)` lists or a `tf.data.Dataset` of string pairs.
        output_dir: the run directory (created).
        val_data: optional validation pairs in the same forms.
        model_settings: dict of `TransformerConfig` fields (vocabulary sizes come from the tokenizers).
        training_settings: a `TrainingConfig`, or a dict of some of its fields.
        verbose: 0 quiet, 1 progress bars and summaries, 2 one line per epoch.
        distribution: a `DistributionConfig` (several devices or hosts); `None` trains on one device.
        callbacks: extra Keras callbacks, called after the run's own (checkpoints, history, budget).
        overwrite: train from scratch where `output_dir` holds a finished or started run (its files are removed
            first); without it a finished run is refused, and a started one resumes.
        init_from: fine-tune this finished run directory: its weights, tokenizers and model settings (only dropout
            rates may differ), with the fine-tuning schedule's defaults (`keras_transformer.training.fine_tuning`).

    Raises:
        SettingError: a setting outside what is allowed (before any work starts).
        RunDirectoryError: an `output_dir` that is not a run's, a finished run without `overwrite`, or a started
            run with other settings.
        TrainingDivergedError: the loss became NaN or infinite; the last good checkpoint is kept.

    Returns:
        A `Run`.

    Example (`tmp` is an empty directory; a tiny model on the synthetic date corpus, a few seconds):

    >>> from keras_transformer.data import make_synthetic_corpus
    >>> run = train(make_synthetic_corpus(300, seed=0), os.path.join(tmp, "dates"),
    ...             model_settings={"num_layers": 1, "d_model": 32, "num_heads": 2, "d_ff": 64, "max_length": 32},
    ...             training_settings={"epochs": 1, "vocab_size": 200, "jit_compile": False}, verbose=0)
    >>> os.path.exists(os.path.join(tmp, "dates", "model.keras")), run.model_config.num_layers
    (True, 1)
    """
    model_settings, training_config, distribution = _checked_settings(
        model_settings, training_settings, distribution, init_from, output_dir)
    placement = setup_distribution(distribution)  # first: it configures devices before TensorFlow runs an op
    writer = placement.is_chief
    verbose = verbose if writer else 0
    # A fine-tune's starting run is loaded before anything is written (a damaged file is named at once).
    initial = load_run(training_config.init_from) if training_config.init_from is not None else None
    if writer:
        check_output_path(output_dir)
    with contextlib.ExitStack() as scratch:
        if writer:
            _claim_run_directory(scratch, output_dir, overwrite, model_settings, training_config)
        keras.utils.set_random_seed(training_config.seed)
        if verbose and distribution.mode:
            print(f"Distributed training: {placement.description}")

        source, val_source = _sources(train_data, val_data, training_config, initial is not None, verbose)
        # The vocabulary sample (up to `vocab_sample` pairs of Python strings) is freed once the tokenizers are
        # learned; when the caller kept no reference to the corpus (the CLI does not), its memory goes back
        # before the model takes its own.
        del train_data
        tokenizers = _tokenizers(output_dir, source, initial, training_config, writer, verbose)
        source = dataclasses.replace(source, vocabulary_sample=None)
        _release_freed_memory()

        model_config = _model_config(model_settings, *tokenizers)
        if writer:
            write_run_config(output_dir, model_config, training_config)
        data = training_data(source, val_source, tokenizers, model_config, training_config, placement.shard, verbose)
        if writer:  # again, with the pairs read, kept and skipped
            write_run_config(output_dir, model_config, training_config, data=data.record)
        state = load_checkpoint_state(output_dir)
        model, schedule = _build_model(model_config, training_config, data.steps, placement, state, initial,
                                       verbose)
        initial = None  # its model is no longer needed
        if verbose:
            _describe_start(model, model_config, training_config, state)

        return _fit_and_save(model, schedule, state, scratch, output_dir, writer, model_config, training_config,
                             tokenizers, data, callbacks, verbose)


def _fit_and_save(model, schedule, state, scratch, output_dir, writer, model_config, training_config, tokenizers,
                  data, callbacks, verbose):
    """Fits `model` with the run's callbacks (checkpoints, history, budget, the final weights), then writes
    `model.keras`; returns the `Run`."""
    callback_dir = _callback_dir(scratch, output_dir, writer)
    checkpoint = ResumableCheckpoint(callback_dir, data.position, every_steps=training_config.checkpoint_every,
                                     resume_state=state, pass_steps=data.pass_steps,
                                     epoch_steps=data.steps if data.exact else None)
    final = _final_weights(callback_dir, output_dir, data, training_config, state)
    run_callbacks = _run_callbacks(callback_dir, checkpoint, final, schedule, data, training_config, state,
                                   list(callbacks or []))
    start = time.time()
    try:
        _fit(model, data, run_callbacks, final, state, training_config, verbose)
    except TrainingDivergedError as error:
        raise TrainingDivergedError(_diverged_message(error, output_dir, checkpoint)) from None
    final.finish(model, verbose)
    elapsed = time.time() - start
    _save_final_model(model, callback_dir, output_dir, writer)
    if verbose:
        print(f"Trained in {elapsed:.0f} s; wrote {output_dir}/{MODEL_FILE}, tokenizers/, config.json, history.*")
    return Run(model, *tokenizers, model_config, training_config, output_dir)


def _checked_settings(model_settings, training_settings, distribution, init_from, output_dir):
    """`(model settings, TrainingConfig, DistributionConfig)`: every setting checked before any work starts.

    A `SettingError` names the setting, the value and the rule; a fine-tune (`init_from`) takes its starting
    run's model settings and the fine-tuning schedule's defaults.
    """
    model_settings_in = model_settings
    if isinstance(training_settings, TrainingConfig):  # as the dict of the fields it sets away from the defaults
        if init_from is None:
            init_from = training_settings.init_from
        training_settings = {field.name: getattr(training_settings, field.name)
                             for field in dataclasses.fields(TrainingConfig) if field.name != "init_from"
                             and getattr(training_settings, field.name) != field.default}
    model_settings, checked_training = check_settings({**(model_settings or {}), **(training_settings or {})})
    if init_from is not None:
        init_from = os.path.abspath(init_from)
        model_settings, checked_training = fine_tuning_settings(init_from, output_dir, model_settings,
                                                                checked_training)
    else:
        refuse_language_pair(checked_training)
    distribution = distribution or DistributionConfig()
    if distribution.mode == "mirrored":  # refuses --jit-compile, or notes that the step runs without XLA
        check_mirrored_jit_compile({**(model_settings_in or {}), **(training_settings or {})}.get("jit_compile"))
    training_config = TrainingConfig(**checked_training, init_from=init_from)
    if distribution.mode and training_config.rdrop:
        raise ValueError("rdrop is not supported with --distribute: the devices would each get one copy of an "
                         "example instead of both")
    if distribution.mode == "multi-host" and training_config.max_minutes is not None:
        raise ValueError("max_minutes is not supported with --distribute multi-host: each process would time "
                         "itself and they could stop at different steps")
    return model_settings, training_config, distribution


def _claim_run_directory(scratch, output_dir, overwrite, model_settings, training_config):
    """Takes the run directory's lock (held until `scratch` closes) and prepares it: a new run, or a resume of
    the same settings.

    One writer per run directory: a second `train` on the same output stops at once, and the lock is released
    however this process ends.
    """
    scratch.enter_context(RunLock(output_dir))
    if prepare_run_directory(output_dir, overwrite=overwrite) == "resume":
        saved = read_run_config(output_dir)["model"]
        check_resume_settings(output_dir, TransformerConfig(
            src_vocab_size=saved["src_vocab_size"], tgt_vocab_size=saved["tgt_vocab_size"],
            **model_settings).to_dict(), dataclasses.asdict(training_config))


def _sources(train_data, val_data, training_config, fine_tune, verbose):
    """`(training pairs, validation pairs or None)` as `keras_transformer.data.streaming.PairsSource`s."""
    sample_size = 1 if fine_tune else training_config.vocab_sample  # a fine-tune learns no vocabulary
    source = pairs_source(train_data, max_words=training_config.max_words, sample_size=sample_size,
                          seed=training_config.seed, verbose=verbose)
    if verbose:
        print(source.summary)
    return source, pairs_source(val_data) if val_data is not None else None


def _tokenizers(output_dir, source, initial, training_config, writer, verbose):
    """`(source tokenizer, target tokenizer)`: those of a resumed run, of the run a fine-tune starts from, or
    learned from `source`'s vocabulary sample; saved in the run directory."""
    if os.path.isdir(os.path.join(output_dir, "tokenizers", "source")):
        tokenizers = load_tokenizers(output_dir)
        if verbose:
            print(f"Reusing the tokenizers saved in {output_dir}/tokenizers (resuming)")
        return tokenizers
    if initial is not None:
        tokenizers = fine_tuning_tokenizers(initial, training_config)
        if writer:
            save_tokenizers(output_dir, *tokenizers)
        return tokenizers
    start = time.time()
    tokenizers = train_tokenizers(source.vocabulary_sample, vocab_size=training_config.vocab_size,
                                  shared=training_config.shared_vocab, verbose=verbose)
    if writer:
        save_tokenizers(output_dir, *tokenizers)
    if verbose:
        print(f"Tokenizers trained in {time.time() - start:.1f} s")
    _tell_vocabulary_size(training_config.vocab_size, *tokenizers)
    return tokenizers


def _model_config(model_settings, source_tokenizer, target_tokenizer):
    """The `TransformerConfig` of `model_settings` with the tokenizers' vocabulary sizes."""
    # One vocabulary (an imported checkpoint has two tokenizers, one per SentencePiece model, over one vocabulary).
    shared = source_tokenizer is target_tokenizer or source_tokenizer.vocab == target_tokenizer.vocab
    if model_settings.get("share_embeddings") and not shared:
        raise ValueError("share_embeddings needs a shared vocabulary: set shared_vocab too.")
    return TransformerConfig(
        src_vocab_size=source_tokenizer.vocab_size,
        tgt_vocab_size=target_tokenizer.vocab_size,
        **model_settings,
    )


def _build_model(model_config, training_config, steps, placement, state, initial, verbose):
    """`(model, schedule)`: the compiled model, restored from the checkpoint `state` of a resumed run or started
    from the weights of the run `initial` a fine-tune starts from."""
    total_steps = None
    if training_config.decay == "cosine":
        # The cosine decay ends at the last step of the last epoch (with a time budget, of the last epoch that
        # fits: FitCosineToBudget moves the horizon).
        total_steps = steps * training_config.epochs
        if verbose:
            print(f"Cosine learning-rate decay over {training_config.epochs} epochs x {steps} steps"
                  + (" (or the epochs that fit the time budget)" if training_config.max_minutes else ""))
    schedule = make_schedule(model_config.d_model, training_config.warmup_steps, training_config.lr_scale,
                             decay=training_config.decay, total_steps=total_steps)
    with placement.scope():
        model = compile_model(TransformerModel(model_config), model_config, training_config, schedule,
                              jit_compile=placement.jit_compile)
        if state is not None:
            restore_checkpoint(model, state)
        elif initial is not None:
            copy_weights(model, initial.model, training_config.init_from)
    return model, schedule


def _describe_start(model, model_config, training_config, state):
    print(f"Model: {model.count_params():,} parameters, {model_config.num_layers} layers, d_model "
          f"{model_config.d_model}; training {training_config.epochs} epochs")
    if training_config.init_from is not None:
        print(describe_fine_tuning(model_config.d_model, training_config))
    if state is not None:
        print(f"Resuming from the checkpoint at epoch {int(state['epoch']) + 1}, batch {state['batch']} "
              f"(optimizer step {state['step']})")


def _callback_dir(scratch, output_dir, writer):
    """Where this process's callbacks write: the run directory, or for processes other than 0 a scratch
    directory removed when `scratch` closes.

    Every process runs the same callbacks: under JAX, saving weights enters collectives that all processes
    must enter together.
    """
    if writer:
        return output_dir
    callback_dir = scratch.enter_context(tempfile.TemporaryDirectory(prefix="keras-transformer-process-"))
    if os.path.exists(os.path.join(output_dir, "history.json")):
        # The same history as process 0 (a resumed run): the same best-so-far, the same checkpoint decisions.
        shutil.copy(os.path.join(output_dir, "history.json"), callback_dir)
    return callback_dir


def _final_weights(callback_dir, output_dir, data, training_config, state):
    """The `FinalWeights` callback (early stopping, averaging), its state read back from a resumed run's history."""
    resume_epoch = _initial_epoch(state)
    records = read_records(os.path.join(output_dir, "history.json")) if resume_epoch else []
    return FinalWeights(callback_dir, training_config.average_last, training_config.patience,
                        monitor="val_loss" if data.val is not None else "loss",
                        records=[r for r in records if int(r["epoch"]) <= resume_epoch], read_dir=output_dir)


def _run_callbacks(callback_dir, checkpoint, final, schedule, data, training_config, state, extra_callbacks):
    """The run's callbacks in their order: the NaN guard, `make_callbacks`'s, early stopping and averaging, the
    checkpoint, then the caller's."""
    callbacks = make_callbacks(
        callback_dir,
        monitor="val_loss" if data.val is not None else "loss",
        backup=False,
        resume_epoch=_initial_epoch(state),
        max_minutes=training_config.max_minutes,
        # With a time budget, the cosine decay ends with the last epoch that fits it (FitCosineToBudget).
        cosine_schedule=schedule if training_config.decay == "cosine" else None,
        steps_per_epoch=data.steps,
        max_epochs=training_config.epochs,
    )
    callbacks.insert(0, StopOnNonFiniteLoss())  # first: nothing after it sees (or saves) a NaN loss's weights
    # After the history logger: neither runs ahead of history.json; the epoch's snapshot before its checkpoint.
    return [*callbacks, final, checkpoint, *extra_callbacks]


def _initial_epoch(state):
    """The epochs a resumed run has finished (0 for a new run)."""
    return int(state["epoch"]) if state else 0


def _fit(model, data, callbacks, final, state, training_config, verbose):
    """`model.fit` from the checkpoint `state` (None: the first epoch) to the last epoch.

    Keras has no "start at batch b": an epoch interrupted after some batches is completed by a fit() of its
    own, whose dataset skips the batches already done (the checkpoint positions it), then the run goes on from
    the next epoch. With `steps_per_epoch`, epochs are fixed numbers of batches from an endless stream of passes.
    """
    initial_epoch = _initial_epoch(state)
    fixed_steps = training_config.steps_per_epoch
    epoch_steps = data.steps  # `steps_per_epoch` where it is set
    done = int(state["batch"]) if state is not None else 0
    fits = [(initial_epoch, training_config.epochs, epoch_steps)]
    if done > 0:
        fits = [(initial_epoch, initial_epoch + 1, epoch_steps - done),
                (initial_epoch + 1, training_config.epochs, epoch_steps)]
    for number, (first_epoch, last_epoch, steps) in enumerate(fits):
        if first_epoch >= last_epoch or final.stopped or (number and model.stop_training):
            continue
        dataset = data.train
        if data.exact and not fixed_steps:
            # A known epoch length: the progress bar has its total, the epoch ends without "ran out of data".
            dataset = with_known_length(data.train, steps)
        model.fit(
            dataset,
            validation_data=data.val,
            epochs=last_epoch,
            initial_epoch=first_epoch,
            steps_per_epoch=steps if fixed_steps else None,
            callbacks=callbacks,
            shuffle=False,  # the tf.data pipeline shuffles
            verbose=verbose,
        )


def _save_final_model(model, callback_dir, output_dir, writer):
    """Saves the trained model; process 0 then plots the history and removes the checkpoint (last: a run killed
    before that resumes from it, and finishes at once)."""
    save_model(model, callback_dir)
    if writer:
        history_path = os.path.join(output_dir, "history.json")
        if os.path.exists(history_path):
            plot_history(load_history(history_path), os.path.join(output_dir, "history.png"))
        remove_checkpoint(output_dir)  # the final model is saved: nothing left to resume


def _release_freed_memory():
    """Collects garbage and asks glibc to give freed heap pages back to the system (no-op elsewhere)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _diverged_message(error, output_dir, checkpoint):
    kept = checkpoint.saved[-1] if checkpoint.saved else None
    if kept is None and checkpoint.resume_state is not None:
        kept = (checkpoint.resume_state["epoch"], checkpoint.resume_state["batch"])
    at = f"end of epoch {kept[0]}" if kept and not kept[1] else f"epoch {kept[0] + 1}, batch {kept[1]}" if kept else ""
    where = (f"the last good checkpoint ({at}) is kept in "
             f"{output_dir}/checkpoint; lower --lr-scale or set clipnorm and re-run the same command to resume "
             "from it" if kept else "no checkpoint had been written yet; lower --lr-scale or set clipnorm and "
             "re-run")
    return f"training stopped: {error}; nothing non-finite was saved: {where}"


def _tell_vocabulary_size(asked, source, target):
    """Warns when a learned vocabulary is far from `vocab_size` (the learner lands within 5% below it)."""
    sizes = {"source": source.vocab_size} if source is target else {"source": source.vocab_size,
                                                                     "target": target.vocab_size}
    for side, size in sizes.items():
        if size > asked:
            warnings.warn(f"vocab_size = {asked}: the {side} vocabulary has {size} tokens, more than asked, because "
                          "every character of the corpus needs a token of its own", VocabularySizeWarning,
                          stacklevel=4)
        elif size < 0.9 * asked:  # the learner lands up to ~5% below by design (SubwordTokenizer.train)
            warnings.warn(f"vocab_size = {asked}: the {side} vocabulary has only {size} tokens; the corpus supports "
                          "no more pieces seen at least twice", VocabularySizeWarning, stacklevel=4)


class VocabularySizeWarning(UserWarning):
    """A learned vocabulary is larger or much smaller than `vocab_size` asked for."""
