"""Data: parallel corpora -> WordPiece tokenizers -> `tf.data` training batches.

Data flows one way (text -> tokenizer -> tf.data -> model); nothing here imports the model, decoding, export or
training packages.
"""

from keras_transformer.data.corpus import CorpusError
from keras_transformer.data.corpus import ParallelCorpus
from keras_transformer.data.corpus import as_corpus
from keras_transformer.data.corpus import corpus_from_dataset
from keras_transformer.data.corpus import download_multi30k
from keras_transformer.data.corpus import read_lines
from keras_transformer.data.corpus import read_parallel_corpus
from keras_transformer.data.corpus import read_tsv_corpus
from keras_transformer.data.pipeline import make_dataset
from keras_transformer.data.pipeline import measure_throughput
from keras_transformer.data.pipeline import padding_fraction
from keras_transformer.data.synthetic import make_synthetic_corpus
from keras_transformer.data.synthetic import make_synthetic_splits
from keras_transformer.data.tokenizer import RESERVED_TOKENS
from keras_transformer.data.tokenizer import SubwordTokenizer
from keras_transformer.data.tokenizer import tokenizers_are_shared
from keras_transformer.data.tokenizer import train_tokenizers
from keras_transformer.data.words import count_words
from keras_transformer.data.words import split_words

__all__ = [
    "RESERVED_TOKENS",
    "CorpusError",
    "ParallelCorpus",
    "SubwordTokenizer",
    "as_corpus",
    "corpus_from_dataset",
    "count_words",
    "download_multi30k",
    "make_dataset",
    "make_synthetic_corpus",
    "make_synthetic_splits",
    "measure_throughput",
    "padding_fraction",
    "read_lines",
    "read_parallel_corpus",
    "read_tsv_corpus",
    "split_words",
    "tokenizers_are_shared",
    "train_tokenizers",
]
