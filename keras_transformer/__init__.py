"""keras-transformer: encoder-decoder Transformers for Keras 3 that train, decode fast and deploy.

The public API, from text to a deployed model:

    tokenizers   SubwordTokenizer, train_tokenizers, read_parallel_corpus
    layers       PositionalEmbedding, MultiHeadAttention, TransformerEncoder, TransformerDecoder (and `layers`)
    model        build_transformer, TransformerConfig
    decoding     Translator, generate (any sampler), greedy_decode, beam_search
    runs         train, TrainingConfig, Run, load_run, check_settings, SettingError
    pretrained   import_checkpoint (Marian / OPUS-MT, M2M-100 and NLLB-200 checkpoints -> a run directory),
                 import_marian, SentencePieceTokenizer
    keras-hub    TransformerBackbone, TransformerTokenizer, TransformerSeq2SeqLMPreprocessor, TransformerSeq2SeqLM
                 (keras_hub.models.Seq2SeqLM.from_preset, fit on strings, generate, LoRA, int8, presets)
    export       export_run (every format of a run: SavedModel, TFLite, CTranslate2, preset)
    translators  load_translator (any artifact), SavedModelTranslator, TFLiteTranslator, CTranslate2Translator

`import keras_transformer` registers every class that a saved run refers to (the layers, the model's parts, the
learning-rate schedule, the loss and the metric, and the keras-hub classes), so that
`keras.saving.load_model("RUN/model.keras")` opens a run's model and `keras_hub.models.Seq2SeqLM.from_preset(DIR)` a
preset. This imports Keras, with the backend `KERAS_BACKEND` names: set it before the import, as for Keras itself.
The `keras-transformer` command is the exception: it imports nothing heavy until its flags are checked (`--help` and
a bad flag answer at once) and a multi-host run has chosen the JAX backend. The other top-level names load on first
use.
"""

import importlib
import os
import sys

from keras_transformer.lazy import lazy_names

__version__ = "0.1.0"

_EXPORTS = {
    "keras_transformer.layers": (
        None, "PositionalEmbedding", "MultiHeadAttention", "TransformerEncoder", "TransformerDecoder",
    ),
    "keras_transformer.models.config": ("TransformerConfig",),
    "keras_transformer.models": ("build_transformer", "TransformerBackbone"),
    "keras_transformer.data.tokenizer": ("SubwordTokenizer", "train_tokenizers"),
    "keras_transformer.data.corpus": ("read_parallel_corpus",),
    "keras_transformer.decoding": (None, "generate", "greedy_decode", "beam_search"),
    "keras_transformer.decoding.translator": ("Translator",),
    "keras_transformer.runs.config": ("TrainingConfig", "check_settings"),
    "keras_transformer.runs.run": ("Run", "load_run"),
    "keras_transformer.training.trainer": ("train",),
    "keras_transformer.validation": ("SettingError",),
    "keras_transformer.tasks": ("TransformerTokenizer", "TransformerSeq2SeqLMPreprocessor", "TransformerSeq2SeqLM"),
    "keras_transformer.importers": ("import_checkpoint", "import_marian"),
    "keras_transformer.data.sentencepiece_tokenizer": ("SentencePieceTokenizer",),
    "keras_transformer.export.exporter": ("export_run",),
    "keras_transformer.translators": (
        "load_translator", "SavedModelTranslator", "TFLiteTranslator", "CTranslate2Translator",
    ),
}

_LAZY_NAMES, __getattr__, __dir__ = lazy_names(__name__, _EXPORTS)
__all__ = sorted(["__version__", *_LAZY_NAMES])


# The modules whose `keras.saving.register_keras_serializable` classes a run's `model.keras` names.
_SERIALIZABLE = (
    "keras_transformer.layers",
    "keras_transformer.models.transformer",
    "keras_transformer.models.backbone",
    "keras_transformer.models.output_projection",
    "keras_transformer.training.schedule",
    "keras_transformer.training.losses",
    "keras_transformer.training.metrics",
)


def _tensorflow_importable():
    """Whether `import tensorflow` can work here (a GPU machine may have only JAX or PyTorch)."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"] is not None
    import importlib.util

    return importlib.util.find_spec("tensorflow") is not None


def _started_as_the_command_line():
    """True while the `keras-transformer` command (or `python -m keras_transformer.cli`) imports the package."""
    program = sys.argv[0] if sys.argv else ""
    return os.path.basename(program) in ("keras-transformer", "keras-transformer.exe") or program == "-m"


if not _started_as_the_command_line():
    for _module in _SERIALIZABLE:
        importlib.import_module(_module)
    del _module
    if _tensorflow_importable():  # keras-hub's classes, for `from_preset`: their tokenizers are TensorFlow ops
        importlib.import_module("keras_transformer.tasks")
