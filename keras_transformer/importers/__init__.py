"""Other toolkits' checkpoints -> a run directory (config, weights, tokenizers); nothing above knows where a run
came from.

`import_checkpoint(source, output_dir)` reads `config.json` and dispatches on its `model_type` through `IMPORTERS`:
`"marian"` (OPUS-MT, `keras_transformer.importers.marian`) and `"m2m_100"` (M2M-100 and NLLB-200,
`keras_transformer.importers.m2m_100`). Any other `model_type` is refused in one line that names it and the
supported ones.
"""

import os

from keras_transformer.importers.checkpoint import HUB_PREFIX
from keras_transformer.importers.checkpoint import CheckpointError
from keras_transformer.importers.checkpoint import read_json_object
from keras_transformer.importers.checkpoint import resolve_source
from keras_transformer.importers.m2m_100 import import_m2m_100
from keras_transformer.importers.marian import import_marian

# model_type -> (module, import function, the Hub files it reads)
IMPORTERS = {
    "marian": ("keras_transformer.importers.marian", "import_marian"),
    "m2m_100": ("keras_transformer.importers.m2m_100", "import_m2m_100"),
}
# Architectures that are refused with a reason (the rest: "not supported").
_REFUSED = {
    "nllb-moe": "NLLB-MoE's feed-forward blocks are mixtures of experts with a router, which this package's blocks do "
                "not have; the dense NLLB-200 checkpoints (model_type m2m_100, e.g. facebook/nllb-200-distilled-600M) "
                "import",
}
_REFUSED["nllb_moe"] = _REFUSED["nllb-moe"]

__all__ = ["CheckpointError", "HUB_PREFIX", "IMPORTERS", "checkpoint_model_type", "import_checkpoint",
           "import_m2m_100", "import_marian", "resolve_source"]


def checkpoint_model_type(directory):
    """The supported `model_type` of the checkpoint in `directory` (its `config.json`).

    Raises:
        CheckpointError: no `config.json`, or a `model_type` that no importer reads (named, with the supported list).
    """
    path = os.path.join(directory, "config.json")
    config = read_json_object(path, "the model's config.json")
    model_type = config.get("model_type")
    if model_type in IMPORTERS:
        return model_type
    supported = ", ".join(sorted(IMPORTERS))
    reason = _REFUSED.get(model_type, "no importer reads it")
    raise CheckpointError(f"{path}: model_type {model_type!r} is not supported ({reason}); supported: {supported}")


def import_checkpoint(source, output_dir, overwrite=False, verbose=1):
    """Imports the checkpoint at `source` (a directory or `hf://OWNER/NAME`) as the run directory `output_dir`,
    with the importer its `config.json`'s `model_type` names (`IMPORTERS`).

    Raises:
        CheckpointError: an unsupported `model_type` (named, with the supported ones), or what the importer refuses.

    Example (`checkpoint_dir` holds a checkpoint in the Hugging Face layout; `hf://facebook/nllb-200-distilled-600M`
    or `hf://Helsinki-NLP/opus-mt-de-en` downloads one):

    >>> import_checkpoint(checkpoint_dir, "runs/imported", verbose=0)
    'runs/imported'
    """
    import importlib

    if os.fspath(source).startswith(HUB_PREFIX):
        directory = resolve_source(source, ("config.json",), verbose=0)
    else:
        directory = resolve_source(source, (), verbose=0)
    module, function = IMPORTERS[checkpoint_model_type(directory)]
    return getattr(importlib.import_module(module), function)(source, output_dir, overwrite=overwrite,
                                                               verbose=verbose)
