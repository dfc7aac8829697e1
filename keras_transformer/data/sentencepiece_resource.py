"""tensorflow-text's `SentencepieceTokenizer` on a model that outlives TensorFlow's cache clears.

tensorflow-text keeps a `SentencepieceTokenizer`'s model in a resource that belongs to the eager kernel that made it,
and TensorFlow drops that kernel whenever it clears its caches: `tf.random.set_seed`, `keras.utils.set_random_seed`
(which `train` calls after loading a fine-tune's starting run) and Keras' reset of its global state. Every
tokenizer made before then fails with "Resource ... does not exist". Here the model is kept in TensorFlow's resource
manager under a name of its own, derived from the model's bytes: it stays until the process ends, and tokenizers of
the same model share it (in a SavedModel too, where the name also keeps two different models apart).
"""

import hashlib

import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.python.ops.sentencepiece_tokenizer import gen_sentencepiece_tokenizer


def resource_name(model_proto):
    """The name a model is kept under: from its bytes, so that only equal models share one."""
    return f"sentencepiece_{hashlib.sha1(model_proto).hexdigest()[:16]}"


class SharedSentencepieceModel(tf.saved_model.experimental.TrackableResource):
    """A serialized SentencePiece model (`model_proto`, bytes) as a resource kept under `resource_name`."""

    def __init__(self, model_proto):
        super().__init__()
        self._model_proto = model_proto
        _ = self.resource_handle  # made now, as tensorflow-text does

    def _create_resource(self):
        name = resource_name(self._model_proto)
        with tf.name_scope(name):
            return gen_sentencepiece_tokenizer.sentencepiece_op(model=self._model_proto, shared_name=name)


def standard_sentencepiece_tokenizer(model_proto):
    """`tensorflow_text.SentencepieceTokenizer(model_proto, out_type=tf.int32)` on a `SharedSentencepieceModel`.

    Example (`model_proto` is a SentencePiece model's bytes):

    >>> tokenizer = standard_sentencepiece_tokenizer(model_proto)
    >>> tf.random.set_seed(0)  # clears TensorFlow's caches
    >>> tokenizer.tokenize(["a sentence"]).shape.rank
    2
    """
    tokenizer = tf_text.SentencepieceTokenizer(model_proto, out_type=tf.int32, name=resource_name(model_proto))
    tokenizer._model_resource = SharedSentencepieceModel(model_proto)  # what its tokenize/detokenize ops read
    return tokenizer
