"""Which tokenizer a saved tokenizer directory holds: `load_tokenizer` reads its `tokenizer.json` "format" and loads
it with its class (`SubwordTokenizer` for runs that `train` wrote, `SentencePieceTokenizer` for imported Marian
checkpoints, `MultilingualTokenizer` for imported M2M-100 and NLLB-200 checkpoints). All have the same interface:
ids, `tokenize`, `detokenize`, `save`, `load`.
"""

import json
import os

TOKENIZER_CONFIG = "tokenizer.json"
_CLASSES = {
    "keras_transformer.SubwordTokenizer": ("keras_transformer.data.tokenizer", "SubwordTokenizer"),
    "keras_transformer.SentencePieceTokenizer": ("keras_transformer.data.sentencepiece_tokenizer",
                                                 "SentencePieceTokenizer"),
    "keras_transformer.MultilingualTokenizer": ("keras_transformer.data.multilingual_tokenizer",
                                                "MultilingualTokenizer"),
}


def tokenizer_format(directory):
    """The "format" named in `directory/tokenizer.json` (None when the file is missing or unreadable: the class's
    own `load` then names what is wrong)."""
    try:
        with open(os.path.join(directory, TOKENIZER_CONFIG), encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return config.get("format") if isinstance(config, dict) else None


def load_tokenizer(directory):
    """Loads the tokenizer saved in `directory`, whichever class saved it.

    Raises:
        FileNotFoundError, ValueError: naming the file when it is missing, damaged or of an unknown format.
    """
    import importlib

    found = tokenizer_format(directory)
    module, name = _CLASSES.get(found, _CLASSES["keras_transformer.SubwordTokenizer"])
    if found is not None and found not in _CLASSES:
        raise ValueError(f"{os.path.join(directory, TOKENIZER_CONFIG)}:1: unknown tokenizer \"format\" {found!r}; "
                         f"expected one of {sorted(_CLASSES)}")
    return getattr(importlib.import_module(module), name).load(directory)
