"""TFLite export of a `TranslatorModule`: strings in, strings out, builtins plus tensorflow-text custom ops (its client:
`keras_transformer.translators.TFLiteTranslator`).

TensorFlow's Python TFLite interpreter has no Flex delegate, so the converted model may hold only TFLite builtin
ops and the tensorflow-text custom ops that `tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS` registers.
`export_tflite` converts with `supported_ops=[TFLITE_BUILTINS]` and `allow_custom_ops=True`, then checks every
operator code of the result (`tflite_op_names`, `check_tflite_ops`): a select-TF (Flex) op or an unknown custom op
is an error at export time rather than at the user's first call.

How the graph was made convertible:

- Weights become constants. Keras layers read their variables where they are used; a read left inside the
  `tf.while_loop` body stays a resource-variable op (`VAR_HANDLE`/`READ_VARIABLE`) that nothing initializes, and
  the interpreter fails at its first call. The decoders read every weight once, before the loop
  (`weights_read_once`). The string-to-string file is then frozen in TensorFlow (every variable of the concrete
  function turned into a constant) and converted through a temporary SavedModel that keeps the `serving_default`
  signature and its `text`/`translation` names. The multilingual (token-id) file is converted from a SavedModel
  that tracks the plain `tf.Variable`s behind the Keras weights, which the converter freezes itself (tracked as
  Keras variables they would stay variables): no GraphDef holding every weight is made, so a model past
  protobuf's 2 GiB (NLLB-200-distilled-600M) converts, quantized to fit the flatbuffer.
- Greedy decoding picks tokens with `tf.argmax` (Keras' `ops.argmax` adds a `BitwiseAnd`, no builtin).
- Everything else converts as written with `keras.ops`: `slice_update` becomes the builtin `DYNAMIC_UPDATE_SLICE`,
  einsums become `BATCH_MATMUL`/`TRANSPOSE`/`RESHAPE`, `top_k` (beam search) `TOPK_V2`, the ragged tokenizer
  output is made dense (and truncated) by tensorflow-text's `RaggedTensorToTensor`, and detokenizing uses integer
  ops and `FastWordpieceDetokenize` only. Batch size and source length stay dynamic (the interpreter resizes);
  the loop's caches have the static `max_length`.
"""

import json
import os
import shutil
import tempfile
import time

import tensorflow as tf

from keras_transformer.atomic import atomic_path

# The custom ops a translator uses, all registered by `tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS`.
# WordPiece tokenizers (`SubwordTokenizer`) use the first three; SentencePiece ones (imported checkpoints) the rest.
TFTEXT_CUSTOM_OPS = frozenset(
    {"FastWordpieceTokenizeWithOffsets", "TFText>FastWordpieceDetokenize", "RaggedTensorToTensor",
     "TFText>FastSentencepieceTokenize", "TFText>FastSentencepieceDetokenize", "TFText>ByteSplitWithOffsets",
     "TFText>ByteSplitByOffsets"}
)


def _builtin_names():
    from tensorflow.lite.python import schema_py_generated as schema

    return {
        value: name
        for name, value in vars(schema.BuiltinOperator).items()
        if not name.startswith("_") and isinstance(value, int)
    }


def tflite_op_names(model_content):
    """The distinct operators of a TFLite model, over all its subgraphs (loop bodies included).

    Args:
        model_content: the `.tflite` flatbuffer as `bytes`, or a path to it.

    Returns:
        A sorted list of names: builtin ops by their schema name (`"WHILE"`, `"BATCH_MATMUL"`), custom ops by their
        custom code (`"FastWordpieceTokenizeWithOffsets"`, and select-TF ops as `"Flex..."`).
    """
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.python import schema_util

    if isinstance(model_content, (str, os.PathLike)):
        with open(model_content, "rb") as f:
            model_content = f.read()
    model = schema.Model.GetRootAsModel(bytearray(model_content), 0)
    builtins = _builtin_names()
    custom = schema.BuiltinOperator.CUSTOM
    names = set()
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        builtin = schema_util.get_builtin_code_from_operator_code(code)
        if builtin == custom:
            names.add(code.CustomCode().decode("utf-8"))
        else:
            names.add(builtins.get(builtin, f"BUILTIN_{builtin}"))
    return sorted(names)


def check_tflite_ops(model_content, allowed_custom_ops=TFTEXT_CUSTOM_OPS):
    """Raises if a TFLite model needs an op that the Python interpreter cannot run.

    Args:
        model_content: the `.tflite` flatbuffer as `bytes`, or a path to it.
        allowed_custom_ops: custom op names that are registered at run time.

    Returns:
        The model's op names (see `tflite_op_names`).

    Raises:
        ValueError: naming the select-TF (Flex) and unknown custom ops.
    """
    names = tflite_op_names(model_content)
    builtins = set(_builtin_names().values())
    flex = [n for n in names if n.startswith("Flex")]
    unknown = [n for n in names if n not in builtins and n not in allowed_custom_ops and n not in flex]
    if flex or unknown:
        raise ValueError(
            "The TFLite model needs ops that TensorFlow's TFLite interpreter cannot run: "
            + (f"select-TF (Flex) ops {flex} (there is no Flex delegate); " if flex else "")
            + (f"custom ops {unknown} (only {sorted(allowed_custom_ops)} are registered)" if unknown else "")
        )
    return names


def freeze_signature(function, input_name="text", output_name="translation"):
    """A `tf.Module` whose `serving_default` runs `function` with all its variables turned into constants.

    Args:
        function: a `tf.function` with an input signature of one tensor, returning `{output_name: tensor}`.
        input_name: the signature's input name.
        output_name: the signature's output name.

    Returns:
        A `tf.Module` with a `serving` `tf.function` (pass it as `signatures={"serving_default": ...}`).
    """
    from tensorflow.python.framework import convert_to_constants

    concrete = function.get_concrete_function()
    frozen = convert_to_constants.convert_variables_to_constants_v2(concrete)
    spec = concrete.structured_input_signature[0][0]
    module = tf.Module()

    @tf.function(input_signature=[tf.TensorSpec(spec.shape, spec.dtype, name=input_name)], autograph=False)
    def serving(text):
        return {output_name: tf.nest.flatten(frozen(text))[0]}

    module.serving = serving
    return module


QUANTIZATIONS = (None, "float16", "dynamic_range")
SOURCE_FILE = "tflite_inputs.json"  # beside the tokenizer: how long a source the file takes
FLATBUFFER_LIMIT = 2**31  # bytes: a TFLite file is one flatbuffer, which cannot reach 2 GiB


def tokenizer_path(path):
    """The tokenizer directory written beside a multilingual TFLite file: `nllb.tflite` -> `nllb.tokenizer`."""
    path = os.fspath(path)
    return (path[: -len(".tflite")] if path.endswith(".tflite") else path) + ".tokenizer"


def check_tflite_size(weight_bytes, quantize, path):
    """Refuses, in one line and before any work, float32 weights that a TFLite file cannot hold."""
    if quantize is None and weight_bytes >= FLATBUFFER_LIMIT:
        raise ValueError(f"{path}: {weight_bytes / 2**30:.2f} GiB of float32 weights exceed TFLite's 2 GiB flatbuffer "
                         "limit; quantize them (--tflite-quantize dynamic_range: int8, about a quarter; float16: half)")


def ids_function(module):
    """A multilingual export's TFLite signature (its BPE tokenizer runs beside the file, not in it): a new
    `tf.function` `(source_ids int32 [B, S], target_language_ids int32 [B]) -> {"token_ids": int32 [B, L]}` with
    the module's decoding; sources are `[language] X </s>` in the tokenizer's ids, 0-padded, and each row's target
    language id is its first token (forced at no cost), as in the SavedModel."""
    def decode(source_ids, target_language_ids):
        tokens, _ = module.decode_ids(source_ids, module._beam_size, with_scores=False,
                                      first_token=target_language_ids)
        return {"token_ids": tf.cast(tokens, tf.int32)}

    return tf.function(decode, input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids"),
                                                tf.TensorSpec([None], tf.int32, name="target_language_ids")],
                       autograph=False)


def _with_weights(function, translator):
    """A `tf.Module` whose `serving` is `function`, tracking the `tf.Variable`s behind the translator's Keras
    weights. The converter freezes plain variables into constants itself (Keras variables it would leave as
    variables), so no frozen GraphDef is made: one holding every weight would stop at protobuf's 2 GiB, below the
    size of NLLB-200-600M. The decoding loop reads each weight once, before it (`weights_read_once`)."""
    module = tf.Module()
    module.weights = [variable.value for model in translator._models for variable in model.weights]
    module.serving = function
    return module


def export_tflite(translator, path, quantize=None, verbose=0):
    """Converts a `TranslatorModule` to a TFLite string-to-string translator and writes it to `path`.

    The model has one signature, `serving_default`: `text` (`tf.string [batch]`) -> `translation`
    (`tf.string [batch]`), with the translator's decoding (`beam_size`, `max_length`). Run it with
    `InterpreterWithCustomOps(custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS)` (see
    `TFLiteTranslator`).

    A multilingual module (M2M-100, NLLB-200) has a BPE SentencePiece tokenizer, which no TFLite op runs
    (tensorflow-text's `FastSentencepieceTokenizer` segments BPE models as unigram ones): its file takes and returns
    token ids (`ids_function`), and its tokenizer is written beside it (`tokenizer_path`), where
    `TFLiteTranslator` finds it. Weights of 2 GiB or more must be quantized (`check_tflite_size`).

    Args:
        translator: a `keras_transformer.export.TranslatorModule`.
        path: the `.tflite` file to write (parent directories are created).
        quantize: `None` (float32 weights), `"float16"` (weights stored in float16, computed in float32: about half
            the size) or `"dynamic_range"` (int8 weights; matmuls with int8-quantized activations: about a quarter
            of the size, faster, and the least exact).
        verbose: 0 quiet, 1 print what was written.

    Returns:
        The path.

    Raises:
        ValueError: if the converted model would need a Flex op or an unregistered custom op, or for an unknown
            `quantize`.

    Example (`run_dir` is a directory written by `train`, `tmp` an empty directory):

    >>> from keras_transformer import load_run
    >>> from keras_transformer.export import TranslatorModule
    >>> module = TranslatorModule.from_run(load_run(run_dir), max_length=8)
    >>> path = export_tflite(module, os.path.join(tmp, "translator.tflite"), quantize="float16")
    >>> len(TFLiteTranslator(path).translate(["the first of May, nineteen ninety-nine"]))
    1
    """
    if quantize not in QUANTIZATIONS:
        raise ValueError(f"`quantize` must be one of {QUANTIZATIONS}; got {quantize!r}")
    start = time.time()
    tokenizer = translator.target_tokenizer
    multilingual = bool(getattr(tokenizer, "languages", None))
    frozen = _with_weights(ids_function(translator), translator) if multilingual else freeze_signature(
        translator.serving_function(jit_compile=False))
    workdir = tempfile.mkdtemp(prefix="keras_transformer_tflite_")
    try:
        # Inference only: gradient functions are not saved (SiLU's custom gradient captures a constant that a
        # frozen graph cannot hold).
        tf.saved_model.save(frozen, workdir, signatures={"serving_default": frozen.serving},
                            options=tf.saved_model.SaveOptions(experimental_custom_gradients=False))
        converter = tf.lite.TFLiteConverter.from_saved_model(workdir)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        converter.allow_custom_ops = True
        if quantize:
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if quantize == "float16":
            converter.target_spec.supported_types = [tf.float16]
        content = converter.convert()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    check_tflite_ops(content)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    if multilingual:  # the tokenizer first: a file beside no tokenizer would be unusable
        with atomic_path(tokenizer_path(path)) as temporary:
            tokenizer.save(temporary)
            with open(os.path.join(temporary, SOURCE_FILE), "w", encoding="utf-8") as f:
                json.dump({"source_max_length": translator._source_max_length,
                           "max_length": translator._max_length}, f)
    with atomic_path(path) as temporary, open(temporary, "wb") as f:
        f.write(content)
    if verbose:
        weights = f", {quantize} weights" if quantize else ""
        print(f"Wrote the TFLite translator {path} ({len(content) / 2**20:.1f} MiB{weights}) in "
              f"{time.time() - start:.0f} s")
    return path
