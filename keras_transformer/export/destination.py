"""Where an export writes: a new path, or (with `--overwrite`) one that holds what an export of the same kind wrote.

`--overwrite` replaces a SavedModel with a SavedModel, a TFLite file with a TFLite file, a CTranslate2 directory
with a CTranslate2 directory and a preset with a preset; anything else at the path (a run directory, a data folder,
a file of another kind) is refused before any work, so that a mistyped path never loses what it names.
"""

import os

CTRANSLATE2_MARKER = "keras_transformer_ctranslate2.json"


def _is_saved_model(path):
    return os.path.isfile(os.path.join(path, "saved_model.pb"))


def _is_tflite(path):
    try:
        with open(path, "rb") as f:
            return f.read(8)[4:8] == b"TFL3"  # the FlatBuffer file identifier
    except OSError:
        return False


def _is_ctranslate2(path):
    return os.path.isfile(os.path.join(path, CTRANSLATE2_MARKER)) or (
        os.path.isfile(os.path.join(path, "model.bin")) and os.path.isfile(os.path.join(path, "config.json")))


def _is_preset(path):
    return os.path.isfile(os.path.join(path, "metadata.json")) and os.path.isfile(os.path.join(path, "config.json"))


KINDS = {  # kind: (a directory?, what tells it, the flag that names it)
    "SavedModel": (True, _is_saved_model, "--saved-model"),
    "TFLite file": (False, _is_tflite, "--tflite"),
    "CTranslate2 model": (True, _is_ctranslate2, "--ctranslate2"),
    "preset": (True, _is_preset, "--preset"),
}


def check_destination(path, kind, overwrite):
    """Raises `FileExistsError` (one line naming `path`) unless an export of `kind` (a key of `KINDS`) may write
    `path`: it does not exist, or `overwrite` is set and it holds a `kind` (or is an empty directory, for the
    kinds that are directories)."""
    if not path or not os.path.lexists(path):
        return
    directory, holds, flag = KINDS[kind]
    if not overwrite:
        raise FileExistsError(f"{path}: exists; pass --overwrite to replace it with the new {kind}")
    if os.path.isdir(path) != directory or os.path.islink(path):
        want = "a directory" if directory else "a file"
        raise FileExistsError(f"{path}: is {'a directory' if os.path.isdir(path) else 'a file'}; {flag} names "
                              f"{want} to write")
    if directory and not os.listdir(path):
        return
    if not holds(path):
        raise FileExistsError(f"{path}: exists and is not a {kind}; --overwrite replaces only what an export of "
                              f"the same kind wrote (choose another {flag} path, or remove it yourself)")
