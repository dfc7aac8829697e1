"""Every artifact that translates, behind one interface (`BaseTranslator`) and one loader (`load_translator`).

    load_translator(path)   a run or ensemble directory, a preset, a SavedModel, a TFLite file or a CTranslate2
                            directory -> its translator

- a run or ensemble directory: `Translator` (the model in Python, KV-cached decoding;
  `keras_transformer.decoding.translator`);
- a preset (`export --preset`): `TransformerSeq2SeqLM`, keras-hub's task (`keras_transformer.tasks`);
- a SavedModel: `SavedModelTranslator` (`keras_transformer.translators.saved_model`);
- a TFLite file: `TFLiteTranslator` (`keras_transformer.translators.tflite`);
- a CTranslate2 directory: `CTranslate2Translator` (`keras_transformer.translators.ctranslate2`).

Each has the `translate` of `BaseTranslator`, documented there once:

    translate(texts, beam_size=None, length_penalty=None, batch_size=32, max_length=None, verbose=0,
              source_language=None, target_language=None) -> list of str

and sorts and batches texts with one function, `keras_transformer.decoding.base_translator.translate_in_batches`.
The run's `Translator` sits below this package (training, export and the keras-hub task decode with it); the
writers of the exported formats are in `keras_transformer.export`.
"""

from keras_transformer.lazy import lazy_names

__all__, __getattr__, __dir__ = lazy_names(__name__, {
    "keras_transformer.translators.loader": ("load_translator",),
    "keras_transformer.decoding.base_translator": ("BaseTranslator",),
    "keras_transformer.decoding.translator": ("Translator",),
    "keras_transformer.translators.saved_model": ("SavedModelTranslator",),
    "keras_transformer.translators.tflite": ("TFLiteTranslator",),
    "keras_transformer.translators.ctranslate2": ("CTranslate2Translator",),
})
