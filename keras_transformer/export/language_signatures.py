"""The signatures of a multilingual export (M2M-100, NLLB-200): one SavedModel translates into any of its languages.

`serving_default` takes `text` and `target_language` (`tf.string [B]` each: a code per row, such as `"deu_Latn"`);
`translate_languages` also takes `source_language` (`""` in a row: the model's default source language). Both
return `{"translation": [B]}`. Rows into different languages decode in one batch: a row's source starts with its
source language's code, and its target language's code is forced as its first token (then dropped from the text).
An unknown code fails the call with an `InvalidArgumentError` that names the codes the export knows of; the Python
client (`SavedModelTranslator`) checks codes before calling, with the closest valid ones in its message.
"""

import tensorflow as tf


def language_table(tokenizer):
    """`(codes, ids)`: the tokenizer's language codes `tf.string [N]` and their ids `int32 [N]`."""
    codes = list(tokenizer.languages)
    return tf.constant(codes, tf.string), tf.constant([tokenizer.language_id(code) for code in codes], tf.int32)


def language_ids(codes, table, default, what):
    """int32 `[B]`: the id of each row's code in `codes` (`tf.string [B]`); `""` is `default` (a code, or `None`:
    then `""` is refused too). An unknown code raises `InvalidArgumentError` when the graph runs."""
    known, ids = table
    matches = tf.equal(tf.expand_dims(codes, 1), tf.expand_dims(known, 0))  # [B, N]
    found = tf.reduce_any(matches, axis=1)
    chosen = tf.gather(ids, tf.argmax(tf.cast(matches, tf.int32), axis=1, output_type=tf.int32))
    if default is not None:
        blank = tf.equal(codes, "")
        default_id = tf.gather(ids, tf.argmax(tf.cast(tf.equal(known, default), tf.int32), output_type=tf.int32))
        chosen = tf.where(blank, default_id, chosen)
        found = tf.logical_or(found, blank)
    listed = ", ".join(code.decode("utf-8") for code in known.numpy()[:8].tolist())
    check = tf.debugging.Assert(tf.reduce_all(found), [f"unknown {what} code (known: {listed}, ...):",
                                                       tf.boolean_mask(codes, tf.logical_not(found))])
    with tf.control_dependencies([check]):
        return tf.identity(chosen)


def multilingual_signatures(module):
    """`{name: tf.function}` of a `TranslatorModule` whose tokenizers hold language codes."""
    source, target = module.source_tokenizer, module.target_tokenizer
    source_table, target_table = language_table(source), language_table(target)

    def run(text, source_language, target_language):
        languages = (language_ids(source_language, source_table, source.source_language, "source_language"),
                     language_ids(target_language, target_table, None, "target_language"))
        return {"translation": module.run(text, module._beam_size, languages=languages)[0]}

    text = tf.TensorSpec([None], tf.string, name="text")

    @tf.function(input_signature=[text, tf.TensorSpec([None], tf.string, name="source_language"),
                                  tf.TensorSpec([None], tf.string, name="target_language")], autograph=False)
    def translate_languages(text, source_language, target_language):
        return run(text, source_language, target_language)

    # `serving_default` calls `translate_languages` (each row's default source language): the decoding is traced
    # and saved once, as one function that both signatures call.
    @tf.function(input_signature=[text, tf.TensorSpec([None], tf.string, name="target_language")], autograph=False)
    def translate(text, target_language):
        return translate_languages(text, tf.fill(tf.shape(text), ""), target_language)

    return {"serving_default": translate, "translate_languages": translate_languages}
