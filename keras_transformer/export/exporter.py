"""`export_run`: what `keras-transformer export` does."""

import os

from keras_transformer.atomic import clean_temporaries
from keras_transformer.decoding.beam_search import DEFAULT_LENGTH_PENALTY
from keras_transformer.decoding.beam_search import DEFAULT_LENGTH_PENALTY_RULE
from keras_transformer.export.destination import check_destination
from keras_transformer.export.saved_model import directory_size
from keras_transformer.export.saved_model import export_saved_model
from keras_transformer.export.tflite import check_tflite_size
from keras_transformer.export.tflite import export_tflite
from keras_transformer.export.translator_module import TranslatorModule
from keras_transformer.runs.layout import DEFAULT_SAVED_MODELS


def default_saved_model_path(run_dir):
    """Where `export` writes when no `--saved-model` is given: `saved_models/<run directory name>`.

    When that is the run directory itself (`keras-transformer quickstart` writes its run to `saved_models/quickstart`),
    `saved_models/<run directory name>_saved_model` instead.
    """
    name = os.path.basename(os.path.normpath(os.path.abspath(run_dir)))
    path = os.path.join(DEFAULT_SAVED_MODELS, name)
    if _same_directory(path, run_dir):
        path = os.path.join(DEFAULT_SAVED_MODELS, f"{name}_saved_model")
    return path


def _same_directory(a, b):
    return os.path.realpath(os.path.abspath(a)) == os.path.realpath(os.path.abspath(b))


def export_run(
    run_dir,
    saved_model=None,
    tflite=None,
    beam_size=None,
    max_length=None,
    length_penalty=None,
    tflite_quantize=None,
    verbose=1,
    overwrite=False,
    jit_compile=True,
    length_penalty_rule=None,
    force_end=None,
):
    """Exports a run directory as a string-to-string SavedModel and, optionally, a TFLite model.

    Args:
        run_dir: a run directory written by `keras-transformer train` (or `train(...)`), or an ensemble
            directory (`keras-transformer ensemble`): its members are exported together, decoded as one.
        saved_model: the SavedModel directory to write; default `saved_models/<run directory name>`.
        tflite: a `.tflite` path to write too, or `None`.
        beam_size: decoding of `serving_default` (and of the TFLite model): 1 greedy, more for beam search;
            default the run's (`decoding.json`, from `keras-transformer tune`), else 1.
        max_length: most output tokens (fixed at export); default the run's (`decoding.json`: an imported
            checkpoint's own), else the model's `max_length`.
        force_end: a translation that reaches `max_length` ends there (transformers' `forced_eos_token_id`); default
            the run's (`decoding.json`), else `False`.
        length_penalty: GNMT's alpha for beam search and the `scores` output; default the run's tuned one
            (`decoding.json`, from `keras-transformer tune`; an ensemble's own), else 0.6.
        length_penalty_rule: `"gnmt"` or `"transformers"` (how beam search and `scores` apply the length penalty,
            see `keras_transformer.decoding.beam_search`); default the run's (`decoding.json`), else `"gnmt"`.
        tflite_quantize: `None`, `"float16"` or `"dynamic_range"` weights for the TFLite model (see
            `export_tflite`).
        verbose: 0 quiet, 1 print what was written.
        jit_compile: the SavedModel decodes in one XLA program (TF Serving needs
            `--xla_cpu_compilation_enabled=true`); `False` writes plain graph ops. The TFLite model never uses XLA.
        overwrite: replace an existing SavedModel directory / TFLite file (else they are refused before any
            work). Either way each is written to a temporary name and renamed into place.

    Returns:
        A dict `{"saved_model": path, "tflite": path or None}`.

    Example (`run_dir` is a directory written by `train`, `tmp` an empty directory):

    >>> paths = export_run(run_dir, saved_model=os.path.join(tmp, "dates"), max_length=8, verbose=0)
    >>> os.path.exists(os.path.join(paths["saved_model"], "saved_model.pb")), paths["tflite"]
    (True, None)
    """
    from keras_transformer.runs.ensemble import load_run_or_ensemble

    saved_model = saved_model or default_saved_model_path(run_dir)
    if _same_directory(saved_model, run_dir):
        raise ValueError(f"{saved_model}: the SavedModel would overwrite the run directory; choose another path")
    check_destination(saved_model, "SavedModel", overwrite)
    check_destination(tflite, "TFLite file", overwrite)
    for path in (saved_model, tflite):
        if path:  # what an export killed earlier left beside its destination (never a live process's)
            clean_temporaries(os.path.dirname(os.path.abspath(path)))
    run = load_run_or_ensemble(run_dir)
    if tflite:  # before any work: a TFLite file cannot hold 2 GiB
        models = [member.model for member in run.members] if hasattr(run, "members") else [run.model]
        check_tflite_size(4 * sum(model.count_params() for model in models), tflite_quantize, tflite)
    if beam_size is None:
        beam_size = run.decoding.beam_size if run.decoding is not None else 1
    if length_penalty is None:
        length_penalty = run.decoding.length_penalty if run.decoding is not None else DEFAULT_LENGTH_PENALTY
    if length_penalty_rule is None:
        length_penalty_rule = run.decoding.length_penalty_rule if run.decoding is not None \
            else DEFAULT_LENGTH_PENALTY_RULE
    decoding = getattr(run, "decoding", None)
    if max_length is None and decoding is not None:  # an imported checkpoint's own limit, and its forced end
        max_length = decoding.max_length
    module = TranslatorModule.from_run(run, max_length=max_length, beam_size=beam_size, length_penalty=length_penalty,
                                       length_penalty_rule=length_penalty_rule, jit_compile=jit_compile,
                                       force_end=force_end if force_end is not None else
                                       decoding.force_end if decoding is not None else False)
    if verbose:
        decoding = "greedy" if beam_size == 1 else f"beam search (beam {beam_size})"
        rule = "" if length_penalty_rule == DEFAULT_LENGTH_PENALTY_RULE else f" ({length_penalty_rule} rule)"
        decoding += f"; length penalty {length_penalty:g}{rule} for beam search" + (
            " (decoding.json)" if run.decoding is not None else "")
        what = f"an ensemble of {len(run.members)} runs" if hasattr(run, "members") else "one run"
        print(f"Exporting {run_dir} ({what}): {decoding}, at most {module.get_config()['max_length']} output tokens")
    export_saved_model(module, saved_model, verbose=verbose)
    if tflite:
        export_tflite(module, tflite, quantize=tflite_quantize, verbose=verbose)
    if verbose:
        sizes = f"SavedModel {directory_size(saved_model) / 2**20:.1f} MiB"
        if tflite:
            sizes += f", TFLite {os.path.getsize(tflite) / 2**20:.1f} MiB"
        print(f"Done ({sizes}). Try: echo 'a sentence' | keras-transformer translate {saved_model}")
    return {"saved_model": saved_model, "tflite": tflite}
