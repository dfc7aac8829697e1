"""What every tokenizer of the package shares: the vocabulary by id and the four special ids.

`SubwordTokenizer` (WordPiece, trained here) and `SentencePieceTokenizer` (an imported checkpoint's model) both put
`<pad>` at 0, `<unk>` at 1, `[START]` at 2 and the end token at 3, so that the model, the packer and the decoders
never ask which tokenizer they were given.
"""

import json
import os

import numpy as np
import tensorflow as tf

CONFIG_FILE = "tokenizer.json"


def write_json(path, value, indent=1):
    """Writes `value` as UTF-8 JSON with a final newline (the tokenizers' files)."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(value, f, indent=indent, ensure_ascii=False)
        f.write("\n")


class Tokenizer(tf.Module):
    """Base class of the package's tokenizers: `vocab`, `vocab_size`, the special ids and id <-> token lookups.

    A subclass sets `self._vocab` (the tokens, a sequence indexed by id) in its constructor and implements
    `tokenize(strings)` and `detokenize(ids)` as TensorFlow ops. It is a `tf.Module`, so a SavedModel that holds it
    also holds its tables.
    """

    def _write_config(self, directory):
        """`tokenizer.json` in `directory` (created): `get_config()`, which `load` reads back."""
        os.makedirs(directory, exist_ok=True)
        write_json(os.path.join(directory, CONFIG_FILE), self.get_config())

    def _dense_ids(self, ids):
        """`ids` as a dense int32 tensor (a ragged batch padded with `pad_id`)."""
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=self.pad_id)
        return tf.cast(tf.convert_to_tensor(ids), tf.int32)

    @property
    def vocab(self):
        """The tokens, as a list indexed by id."""
        return list(self._vocab)

    @property
    def vocab_size(self):
        return len(self._vocab)

    @property
    def pad_id(self):
        return 0

    @property
    def unk_id(self):
        return 1

    @property
    def start_id(self):
        return 2

    @property
    def end_id(self):
        return 3

    @property
    def source_start_id(self):
        """The id that starts a packed source sequence, or `None` for tokenizers whose sources have no start."""
        return self.start_id

    @property
    def target_prefix_ids(self):
        """Ids a training target starts with, after `[START]` in the decoder's input and first in the labels (a
        multilingual tokenizer's target language code); empty for the others."""
        return ()

    def token_to_id(self, token):
        """The id of `token`, or `unk_id` when it is not in the vocabulary."""
        if getattr(self, "_index", None) is None:
            self._index = {t: i for i, t in enumerate(self._vocab)}
        return self._index.get(token, self.unk_id)

    def id_to_token(self, token_id):
        return self._vocab[int(token_id)]

    def tokens(self, ids):
        """Python helper: the token strings of one sequence of ids (for debugging and tests)."""
        return [self._vocab[int(i)] for i in np.asarray(ids).reshape(-1)]
