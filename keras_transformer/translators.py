"""One entry point for every artifact that translates: `load_translator(path)`.

A run or ensemble directory (`Translator`), a preset (`TransformerSeq2SeqLM`), an exported SavedModel
(`SavedModelTranslator`), a TFLite file (`TFLiteTranslator`) or a CTranslate2 directory (`CTranslate2Translator`):
each returned object is a `keras_transformer.decoding.translator.BaseTranslator`, with one `translate` signature:

    translate(texts, beam_size=None, length_penalty=None, batch_size=32, max_length=None, verbose=0) -> list of str

`None` means as the artifact decodes by default: a run or ensemble as its `decoding.json` says (else greedy), an
export as it was exported (a value an export cannot decode with is a `ValueError` naming the argument).
"""

import os


def load_translator_and_decoding(path):
    """`(translator, decoding)` for any artifact; `decoding` is a run's `DecodingSettings` (`decoding.json`) or
    `None` (an export decodes as it was exported)."""
    path = os.fspath(path)
    if os.path.isfile(path) and path.endswith(".tflite"):
        from keras_transformer.export.tflite import TFLiteTranslator

        return TFLiteTranslator(path), None
    if os.path.exists(os.path.join(path, "keras_transformer_ctranslate2.json")):
        from keras_transformer.export.ctranslate2_model import CTranslate2Translator

        return CTranslate2Translator(path), None
    if os.path.exists(os.path.join(path, "task.json")):
        from keras_transformer.tasks import TransformerSeq2SeqLM

        return TransformerSeq2SeqLM.from_preset(path), None
    if os.path.exists(os.path.join(path, "saved_model.pb")):
        from keras_transformer.export.saved_model import SavedModelTranslator

        return SavedModelTranslator(path), None
    return load_run_translator(path)


def load_run_translator(path):
    """`(Translator, decoding)` for a run directory or an ensemble directory (`keras-transformer ensemble`)."""
    from keras_transformer.decoding.translator import Translator
    from keras_transformer.runs.ensemble import Ensemble
    from keras_transformer.runs.ensemble import load_run_or_ensemble

    run = load_run_or_ensemble(path)
    model = run.parts if isinstance(run, Ensemble) else run.model
    return Translator(model, run.source_tokenizer, run.target_tokenizer, decoding=run.decoding), run.decoding


def load_translator(path):
    """The translator of a run, an ensemble, a preset, a SavedModel, a TFLite file or a CTranslate2 directory.

    Example (`run_dir` is a run directory, `saved_model_dir` and `tflite_path` its exports):

    >>> [len(load_translator(p).translate(["the first of May, nineteen ninety-nine"]))
    ...  for p in (run_dir, saved_model_dir, tflite_path)]
    [1, 1, 1]
    """
    return load_translator_and_decoding(path)[0]
