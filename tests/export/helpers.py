"""Inputs and a tiny run directory shared by the export tests.

The run directory has exactly what `keras-transformer train` writes that `load_run` reads (`config.json`,
`model.keras`, `tokenizers/`), with tokenizers trained on the synthetic date corpus and a 1-layer, d_model-32 model
with random weights (training it would take most of the test budget; the export tests compare the SavedModel, the
TFLite model and the Python decoders on the same weights, which needs no training).
"""

import dataclasses
import json
import os

import keras

from keras_transformer import TransformerConfig
from keras_transformer.data.synthetic import make_synthetic_corpus
from keras_transformer.data.tokenizer import train_tokenizers
from keras_transformer.models import TransformerModel
from keras_transformer.runs.config import TrainingConfig

MODEL_SETTINGS = dict(num_layers=1, d_model=32, num_heads=2, d_ff=64, dropout=0.0, max_length=24)

# Sentences of the corpus's kind plus a few it never saw.
SENTENCES = [
    "the first of May, nineteen ninety-nine",
    "12.3.2001",
    "November 23rd, 2026",
    "the twenty-third of November, two thousand and twenty-six",
    "Feb 2 1970",
    "a dog runs.",
]
# Inputs that must never fail at serving time.
BAD_INPUTS = [
    "",
    "   ",
    "\t\n",
    "May 3rd, 2011 " * 60,  # far longer than max_length: truncated
    "😀🎉 日本語のテキスト",  # characters outside the vocabulary
    "Ünïcödé ☃ ­",
    b"\xff\xfe\xfd 2011 \xc3\x28 \xed\xa0\x80",  # invalid UTF-8
]


def write_tiny_run(directory, seed=0):
    """Writes a run directory (tokenizers, random-weight model, config) and returns its path."""
    corpus = make_synthetic_corpus(400, seed=seed)
    source, target = train_tokenizers(corpus, vocab_size=150, verbose=0)
    source.save(os.path.join(directory, "tokenizers", "source"))
    target.save(os.path.join(directory, "tokenizers", "target"))
    config = TransformerConfig(source.vocab_size, target.vocab_size, **MODEL_SETTINGS)
    keras.utils.set_random_seed(seed)
    TransformerModel(config).save(os.path.join(directory, "model.keras"))
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
        json.dump({"model": config.to_dict(), "training": dataclasses.asdict(TrainingConfig())}, f, indent=2)
    return str(directory)
