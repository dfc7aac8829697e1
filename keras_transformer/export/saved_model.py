"""SavedModel export of a `TranslatorModule` (its client: `keras_transformer.translators.SavedModelTranslator`).

The exported directory needs only `tensorflow` and `tensorflow_text` to run (importing `tensorflow_text` registers
the tokenizer ops before loading):

    import tensorflow as tf
    import tensorflow_text  # noqa: F401
    translate = tf.saved_model.load("saved_models/dates").signatures["serving_default"]
    print(translate(text=tf.constant(["the first of May, nineteen ninety-nine"]))["translation"])
"""

import os
import time

import tensorflow as tf

from keras_transformer.atomic import atomic_path

CONFIG_FILE = os.path.join("assets.extra", "keras_transformer.json")


def export_saved_model(translator, path, verbose=0):
    """Saves a `TranslatorModule` as a string-to-string SavedModel.

    Signatures: `serving_default` (`text: tf.string [B]` -> `{"translation": tf.string [B]}`),
    `translate_with_ids` (plus `token_ids` and `scores`), `translate_greedy` and `translate_beam` (see
    `TranslatorModule`). The export settings are also written to `assets.extra/keras_transformer.json`.

    Args:
        translator: a `keras_transformer.export.TranslatorModule`.
        path: the SavedModel directory to write (atomically: an earlier export there is replaced whole).
        verbose: 0 quiet, 1 print what was written.

    Returns:
        The path.

    Example (`run_dir` is a directory written by `train`, `tmp` an empty directory):

    >>> from keras_transformer import load_run
    >>> from keras_transformer.export import TranslatorModule
    >>> module = TranslatorModule.from_run(load_run(run_dir), max_length=8)
    >>> path = export_saved_model(module, os.path.join(tmp, "translator"))
    >>> sorted(tf.saved_model.load(path).signatures)[-1]
    'translate_with_prefix'
    """
    start = time.time()
    # Written beside `path` and renamed into place: a killed export leaves the old SavedModel or none, never half.
    with atomic_path(path) as temporary:
        tf.saved_model.save(translator, temporary, signatures=translator.signatures())
        config_path = os.path.join(temporary, CONFIG_FILE)
        os.makedirs(os.path.dirname(config_path), exist_ok=True)
        with open(config_path, "w", encoding="utf-8") as f:
            f.write(translator.to_json() + "\n")
    if verbose:
        print(f"Wrote the SavedModel {path} ({directory_size(path) / 2**20:.1f} MiB) in {time.time() - start:.0f} s; "
              f"signatures: {', '.join(sorted(translator.signatures()))}")
    return path


def directory_size(path):
    """Total size in bytes of the files under `path`."""
    return sum(
        os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names
    )
