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


def export_run(run_dir, saved_model=None, tflite=None, ctranslate2=None, preset=None, beam_size=None, max_length=None,
               length_penalty=None, length_penalty_rule=None, force_end=None, tflite_quantize=None,
               ctranslate2_quantization=None, jit_compile=True, overwrite=False, verbose=1):
    """Exports a run directory: a string-to-string SavedModel, and optionally TFLite, CTranslate2 and a preset.

    Decoding settings left `None` are the run's (`decoding.json`, from `keras-transformer tune` or an imported
    checkpoint), else greedy, 0.6, `"gnmt"`, the model's `max_length` and no forced end.

    Args:
        run_dir: a run directory written by `keras-transformer train` (or `train(...)`), or an ensemble
            directory (`keras-transformer ensemble`): its members are exported together, decoded as one (the
            SavedModel and TFLite model only).
        saved_model: the SavedModel directory to write; default `saved_models/<run directory name>`, unless only
            `ctranslate2` or `preset` is asked for.
        tflite: a `.tflite` path to write too, or `None`.
        ctranslate2: a CTranslate2 model directory to write too (needs the ctranslate2 extra).
        preset: a keras-hub style preset directory to write too (`TransformerSeq2SeqLM.from_preset` loads it).
        beam_size: the decoding all of them fix: 1 greedy, more for beam search.
        length_penalty: GNMT's alpha for beam search and the `scores` output.
        length_penalty_rule: `"gnmt"` or `"transformers"` (see `keras_transformer.decoding.beam_search`).
        max_length: most output tokens.
        force_end: a translation that reaches `max_length` ends there (transformers' `forced_eos_token_id`).
        tflite_quantize: `None`, `"float16"` or `"dynamic_range"` weights for the TFLite model.
        ctranslate2_quantization: CTranslate2's weight type (`None` float32, `"int8"`, `"float16"`, ...).
        verbose: 0 quiet, 1 print what was written.
        jit_compile: the SavedModel decodes in one XLA program (TF Serving needs
            `--xla_cpu_compilation_enabled=true`); `False` writes plain graph ops (TFLite never uses XLA).
        overwrite: replace an existing destination (else refused before any work); each is written atomically.

    Returns:
        `{"saved_model": path, "tflite": path, "ctranslate2": path, "preset": path}`, `None` where not written.

    Example (`run_dir` is a directory written by `train`, `tmp` an empty directory):

    >>> paths = export_run(run_dir, saved_model=os.path.join(tmp, "dates"), max_length=8, verbose=0)
    >>> os.path.exists(os.path.join(paths["saved_model"], "saved_model.pb")), paths["tflite"]
    (True, None)
    """
    from keras_transformer.runs.ensemble import load_run_or_ensemble
    from keras_transformer.runs.layout import ENSEMBLE_FILE

    if os.path.isfile(os.path.join(run_dir, ENSEMBLE_FILE)) and (ctranslate2 or preset):
        what = "a CTranslate2 model" if ctranslate2 else "a preset"
        raise ValueError(f"{run_dir} is an ensemble directory: {what} holds one run (export a member), while the "
                         "SavedModel and TFLite model export the ensemble decoded as one")
    written = {"saved_model": None, "tflite": tflite, "ctranslate2": ctranslate2, "preset": preset}
    if saved_model or tflite or not (ctranslate2 or preset):
        written["saved_model"] = saved_model or default_saved_model_path(run_dir)
    _check_destinations(run_dir, written, overwrite)
    run = load_run_or_ensemble(run_dir)
    if tflite:  # before any work: a TFLite file cannot hold 2 GiB
        models = [member.model for member in run.members] if hasattr(run, "members") else [run.model]
        check_tflite_size(4 * sum(model.count_params() for model in models), tflite_quantize, tflite)
    if ctranslate2:
        from keras_transformer.export.ctranslate2_model import export_ctranslate2

        export_ctranslate2(run, ctranslate2, quantization=ctranslate2_quantization, overwrite=overwrite,
                           verbose=verbose)
    if preset:
        _export_preset(run, preset, beam_size, length_penalty, max_length, overwrite, verbose)
    if written["saved_model"]:
        decoding = _decoding(run, beam_size, length_penalty, length_penalty_rule, max_length, force_end)
        _export_translator_module(run_dir, run, written["saved_model"], tflite, decoding, tflite_quantize,
                                  jit_compile, verbose)
    if verbose:
        for kind in ("ctranslate2", "preset", "saved_model"):
            if written[kind]:
                print(f"Try: echo 'a sentence' | keras-transformer translate {written[kind]}")
    return written


def _check_destinations(run_dir, written, overwrite):
    """Every destination is refused before any work: the run directory itself, or one that exists (without
    `overwrite`). What an export killed earlier left beside a destination (never a live process's) is removed."""
    if written["saved_model"] and _same_directory(written["saved_model"], run_dir):
        raise ValueError(f"{written['saved_model']}: the SavedModel would overwrite the run directory; choose "
                         "another path")
    names = {"saved_model": "SavedModel", "tflite": "TFLite file", "ctranslate2": "CTranslate2 model",
             "preset": "preset"}
    for kind, path in written.items():
        check_destination(path, names[kind], overwrite)
        if path:
            clean_temporaries(os.path.dirname(os.path.abspath(path)))


def _decoding(run, beam_size, length_penalty, length_penalty_rule, max_length, force_end):
    """The decoding the SavedModel and TFLite model fix: what is given, else the run's (`decoding.json`), else
    the defaults."""
    decoding = getattr(run, "decoding", None)
    if decoding is None:
        return dict(beam_size=beam_size or 1, max_length=max_length,
                    length_penalty=DEFAULT_LENGTH_PENALTY if length_penalty is None else length_penalty,
                    length_penalty_rule=length_penalty_rule or DEFAULT_LENGTH_PENALTY_RULE,
                    force_end=bool(force_end))
    return dict(beam_size=beam_size or decoding.beam_size,
                max_length=decoding.max_length if max_length is None else max_length,
                length_penalty=decoding.length_penalty if length_penalty is None else length_penalty,
                length_penalty_rule=length_penalty_rule or decoding.length_penalty_rule,
                force_end=decoding.force_end if force_end is None else force_end)


def _export_translator_module(run_dir, run, saved_model, tflite, decoding, tflite_quantize, jit_compile, verbose):
    """The SavedModel (and the TFLite model) of one `TranslatorModule` with `decoding` fixed."""
    module = TranslatorModule.from_run(run, jit_compile=jit_compile, **decoding)
    if verbose:
        _print_decoding(run_dir, run, decoding, module.get_config()["max_length"])
    export_saved_model(module, saved_model, verbose=verbose)
    if tflite:
        export_tflite(module, tflite, quantize=tflite_quantize, verbose=verbose)
    if verbose:
        sizes = f"SavedModel {directory_size(saved_model) / 2**20:.1f} MiB"
        print(f"Done ({sizes}" + (f", TFLite {os.path.getsize(tflite) / 2**20:.1f} MiB)" if tflite else ")"))


def _print_decoding(run_dir, run, decoding, max_length):
    beam_size, rule = decoding["beam_size"], decoding["length_penalty_rule"]
    text = "greedy" if beam_size == 1 else f"beam search (beam {beam_size})"
    rule = "" if rule == DEFAULT_LENGTH_PENALTY_RULE else f" ({rule} rule)"
    text += f"; length penalty {decoding['length_penalty']:g}{rule} for beam search" + (
        " (decoding.json)" if getattr(run, "decoding", None) is not None else "")
    what = f"an ensemble of {len(run.members)} runs" if hasattr(run, "members") else "one run"
    print(f"Exporting {run_dir} ({what}): {text}, at most {max_length} output tokens")


def _export_preset(run, preset, beam_size, length_penalty, max_length, overwrite, verbose):
    """A keras-hub style preset of `run`, decoding as the run's `decoding.json` says, with `beam_size` and
    `length_penalty` over it."""
    from keras_transformer.decoding.translator import sampler_for
    from keras_transformer.tasks import TransformerSeq2SeqLM

    task = TransformerSeq2SeqLM.from_run(run, sampler=sampler_for(run.decoding, beam_size, length_penalty),
                                         sequence_length=max_length)
    task.save_to_preset(preset, overwrite=overwrite)
    if verbose:
        print(f"Wrote the preset {preset} (keras-hub layout)")
