"""Where things are in a run directory, and where exports go by default (no TensorFlow import: the CLI reads it).

    run_dir/
      model.keras             the trained model (checkpoint-averaged if asked)
      config.json             {"model": TransformerConfig, "training": TrainingConfig}
      tokenizers/source/      SubwordTokenizer (tokenizers/target/ too unless the vocabulary is shared)
      history.json/.csv/.png  per-epoch metrics and a plot of the training curves
      best.keras, last.keras  whole-model checkpoints
      decoding.json           beam size and length penalty chosen on a held-out set (`keras-transformer tune`)
      checkpoint/             the resumable checkpoint while a run is in progress (resume by re-running)
      logs/                   TensorBoard
      .lock                   held by the process writing the run
"""

import os

MODEL_FILE = "model.keras"
CONFIG_FILE = "config.json"
TOKENIZERS_DIR = "tokenizers"
SOURCE_TOKENIZER = os.path.join(TOKENIZERS_DIR, "source")
TARGET_TOKENIZER = os.path.join(TOKENIZERS_DIR, "target")
HISTORY_FILE = "history.json"
DECODING_FILE = "decoding.json"
ENSEMBLE_FILE = "ensemble.json"  # in an ensemble directory (keras_transformer.runs.ensemble), not in a run directory
CHECKPOINT_DIR = "checkpoint"
LOCK_FILE = ".lock"
# Everything `train` writes; `--overwrite` removes exactly these names and nothing else.
RUN_ENTRIES = (MODEL_FILE, CONFIG_FILE, TOKENIZERS_DIR, CHECKPOINT_DIR, HISTORY_FILE, "history.csv", "history.png",
               "best.keras", "last.keras", "logs", "backup", DECODING_FILE)

# `export` writes here when no destination is given (`saved_models/<run directory name>`).
DEFAULT_SAVED_MODELS = "saved_models"
