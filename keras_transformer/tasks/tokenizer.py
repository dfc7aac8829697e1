"""`TransformerTokenizer`: the package's tokenizers as a keras-hub `Tokenizer`.

It wraps one side's tokenizer, a `SubwordTokenizer` (WordPiece, trained by `train`) or a `SentencePieceTokenizer`
(an imported Marian checkpoint), so the ids are the model's own, the detokenizer is the TFLite-safe one, and
keras-hub's preset machinery saves and loads it: `save_assets` writes the wrapped tokenizer's files under
`assets/<config_file stem>/`, `load_preset_assets` reads them back. The special tokens are the package's:
`<pad>`/`[PAD]` 0, `[START]` 2, the end token 3.

Example:

>>> from keras_transformer.data import SubwordTokenizer
>>> inner = SubwordTokenizer(["[PAD]", "[UNK]", "[START]", "[END]", "a", "b", "##c"])
>>> tokenizer = TransformerTokenizer(inner)
>>> keras.ops.convert_to_numpy(tokenizer("a bc")).tolist(), tokenizer.detokenize([4, 5, 6])
([4, 5, 6], 'a bc')
>>> tokenizer.detokenize([[4, 3, 0], [5, 6, 3]])
['a', 'bc']
>>> tokenizer.start_token_id, tokenizer.end_token_id, tokenizer.pad_token_id
(2, 3, 0)
"""

import keras
import keras_hub
import tensorflow as tf

from keras_transformer.data.tokenizers import load_tokenizer
from keras_transformer.data.tokenizers import tokenizer_format
from keras_transformer.models.backbone import TransformerBackbone

# The files each wrapped tokenizer's `save` writes (keras-hub fetches them one by one from a remote preset).
_FILES = {
    "keras_transformer.SubwordTokenizer": ["vocab.txt", "tokenizer.json"],
    "keras_transformer.SentencePieceTokenizer": ["sentencepiece.spm", "vocab.json", "tokenizer.json"],
    "keras_transformer.MultilingualTokenizer": ["sentencepiece.spm", "vocab.json", "tokenizer.json"],
}


def _eager_outputs(outputs):
    """keras-hub's output convention for eager calls: strings as Python `str` (or lists of them), ragged ids as
    lists, dense ids as backend tensors. Inside a `tf.data` map or a `tf.function` the TensorFlow tensor is kept."""
    if not tf.executing_eagerly():
        return outputs
    if isinstance(outputs, tf.RaggedTensor):
        return outputs.to_list()
    if outputs.dtype == tf.string:
        values = outputs.numpy()
        return values.decode("utf-8") if outputs.shape.rank == 0 else [v.decode("utf-8") for v in values.tolist()]
    return keras.ops.convert_to_tensor(outputs.numpy())


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerTokenizer(keras_hub.tokenizers.Tokenizer):
    """One side's tokenizer (source or target) as a keras-hub `Tokenizer`.

    Args:
        tokenizer: a `SubwordTokenizer` or `SentencePieceTokenizer`, or `None` until `load_preset_assets` (what
            keras-hub's preset loader calls) reads it from a preset.
        kind: its format name (set from `tokenizer`; kept in the config so a preset's files are known before they
            are read).
        config_file: the preset file of this tokenizer's config: `tokenizer.json` for the source side,
            `target_tokenizer.json` for a separate target side.

    Example (`run_dir` is a directory written by `train`):

    >>> from keras_transformer import load_run
    >>> tokenizer = TransformerTokenizer(load_run(run_dir).source_tokenizer)
    >>> ids = tokenizer("the first of May")
    >>> tokenizer.detokenize(ids)
    'the first of May'
    """

    backbone_cls = TransformerBackbone

    def __init__(self, tokenizer=None, kind=None, **kwargs):
        super().__init__(**kwargs)
        self._dtype = "int32"
        object.__setattr__(self, "inner", None)
        self.built = True  # no weights: nothing to build
        self.kind = kind or "keras_transformer.SubwordTokenizer"
        if tokenizer is not None:
            self.set_tokenizer(tokenizer)

    def set_tokenizer(self, tokenizer):
        """Wraps `tokenizer` (and sets the special token ids from it)."""
        object.__setattr__(self, "inner", tokenizer)
        self.kind = tokenizer.get_config()["format"]
        self.start_token_id = tokenizer.start_id
        self.end_token_id = tokenizer.end_id
        self.pad_token_id = tokenizer.pad_id
        self.source_start_token_id = tokenizer.source_start_id

    @property
    def file_assets(self):
        return list(_FILES.get(self.kind, _FILES["keras_transformer.SubwordTokenizer"]))

    @file_assets.setter
    def file_assets(self, value):  # keras-hub's constructor sets None; the files follow from `kind`
        pass

    @property
    def special_token_ids(self):
        return sorted({self.pad_token_id, self.start_token_id, self.end_token_id})

    def _check(self):
        if self.inner is None:
            raise ValueError("TransformerTokenizer has no tokenizer yet: pass one, or load it with "
                             "`from_preset` / `load_preset_assets`")
        return self.inner

    def tokenize(self, inputs, *args, **kwargs):
        """Strings -> int32 ids: `[B, None]` ragged for a batch, `[None]` for one string (no start/end)."""
        inner = self._check()
        inputs = tf.convert_to_tensor(inputs, tf.string)
        if inputs.shape.rank == 0:
            return _eager_outputs(tf.cast(inner.tokenize(tf.expand_dims(inputs, 0))[0], "int32"))
        return _eager_outputs(tf.cast(inner.tokenize(inputs), "int32"))

    def detokenize(self, inputs, *args, **kwargs):
        """Ids (dense 0-padded, ragged, or one row) -> strings; special tokens are dropped."""
        inner = self._check()
        if not isinstance(inputs, (tf.Tensor, tf.RaggedTensor)):
            inputs = tf.convert_to_tensor(keras.ops.convert_to_numpy(inputs) if keras.ops.is_tensor(inputs)
                                          else inputs)
        return _eager_outputs(inner.detokenize(inputs))

    def get_vocabulary(self):
        return self._check().vocab

    def vocabulary_size(self):
        return self._check().vocab_size

    def id_to_token(self, id):
        return self._check().id_to_token(id)

    def token_to_id(self, token):
        return self._check().token_to_id(token)

    def save_assets(self, dir_path):
        self._check().save(dir_path)

    def load_assets(self, dir_path):
        found = tokenizer_format(dir_path)
        if found is not None and found != self.kind:
            raise ValueError(f"{dir_path}: holds a {found} tokenizer, but the preset's config says {self.kind}")
        self.set_tokenizer(load_tokenizer(dir_path))

    def get_config(self):
        return {**super().get_config(), "kind": self.kind}
