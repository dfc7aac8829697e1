"""`load_translator(path)`: the translator of any artifact, chosen by what the path holds.

A run or ensemble directory gives a `Translator` whose `decoding` is the run's `decoding.json` (`None` without one);
every other artifact decodes as it was exported, and its `decoding` is `None`.
"""

import os


def load_translator(path):
    """The translator of a run, an ensemble, a preset, a SavedModel, a TFLite file or a CTranslate2 directory.

    Example (`run_dir` is a run directory, `saved_model_dir` and `tflite_path` its exports):

    >>> [len(load_translator(p).translate(["the first of May, nineteen ninety-nine"]))
    ...  for p in (run_dir, saved_model_dir, tflite_path)]
    [1, 1, 1]
    """
    path = os.fspath(path)
    if os.path.isfile(path) and path.endswith(".tflite"):
        from keras_transformer.translators.tflite import TFLiteTranslator

        return TFLiteTranslator(path)
    if os.path.exists(os.path.join(path, "keras_transformer_ctranslate2.json")):
        from keras_transformer.translators.ctranslate2 import CTranslate2Translator

        return CTranslate2Translator(path)
    if os.path.exists(os.path.join(path, "task.json")):
        from keras_transformer.tasks import TransformerSeq2SeqLM

        return TransformerSeq2SeqLM.from_preset(path)
    if os.path.exists(os.path.join(path, "saved_model.pb")):
        from keras_transformer.translators.saved_model import SavedModelTranslator

        return SavedModelTranslator(path)
    from keras_transformer.decoding.translator import Translator
    from keras_transformer.runs.ensemble import Ensemble
    from keras_transformer.runs.ensemble import load_run_or_ensemble

    run = load_run_or_ensemble(path)
    model = run.parts if isinstance(run, Ensemble) else run.model
    return Translator(model, run.source_tokenizer, run.target_tokenizer, decoding=run.decoding)
