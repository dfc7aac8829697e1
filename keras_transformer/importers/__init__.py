"""Other toolkits' checkpoints -> a run directory (config, weights, tokenizers); nothing above knows where a run
came from.

`import_checkpoint(source, output_dir)` reads `config.json` and dispatches on its `model_type`; today Marian
(OPUS-MT) checkpoints (`keras_transformer.importers.marian`).
"""

from keras_transformer.importers.checkpoint import HUB_PREFIX
from keras_transformer.importers.checkpoint import CheckpointError
from keras_transformer.importers.checkpoint import resolve_source
from keras_transformer.importers.marian import import_marian

__all__ = ["CheckpointError", "HUB_PREFIX", "import_checkpoint", "import_marian", "resolve_source"]


def import_checkpoint(source, output_dir, overwrite=False, verbose=1):
    """Imports the checkpoint at `source` (a directory or `hf://OWNER/NAME`) as the run directory `output_dir`.

    Only Marian (OPUS-MT) checkpoints are supported; any other `model_type` is refused naming `config.json`.
    """
    return import_marian(source, output_dir, overwrite=overwrite, verbose=verbose)
