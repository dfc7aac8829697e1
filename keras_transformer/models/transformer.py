"""The encoder-decoder Transformer as a functional Keras model, built from a `TransformerConfig`."""

import dataclasses
import inspect

import keras

from keras_transformer.layers import HashDropout
from keras_transformer.layers import PositionalEmbedding
from keras_transformer.layers import TransformerDecoder
from keras_transformer.layers import TransformerEncoder
from keras_transformer.layers import WordDropout
from keras_transformer.models.config import TransformerConfig
from keras_transformer.models.output_projection import LogitsBias
from keras_transformer.models.output_projection import OutputProjection


def build_transformer(*args, name="transformer", **settings):
    """Build the encoder-decoder Transformer of "Attention Is All You Need" as a functional model.

    Takes the fields of `TransformerConfig`, which documents and checks them, positionally in its order
    (`src_vocab_size, tgt_vocab_size, num_layers=6, d_model=512, num_heads=8, d_ff=2048, dropout=0.1,
    max_length=256`) or by name, and `name`, the model's name.

    Returns:
        A `TransformerModel`: a functional `keras.Model` taking `{"encoder_inputs": int32 [B, S],
        "decoder_inputs": int32 [B, T]}` and returning float32 logits `[B, T, tgt_vocab_size]`.

    Example:

    >>> model = build_transformer(1000, 1000, num_layers=2, d_model=64, num_heads=4, d_ff=128)
    >>> sorted(model.input.keys())
    ['decoder_inputs', 'encoder_inputs']
    """
    return TransformerModel(TransformerConfig(*args, **settings), name=name)


build_transformer.__signature__ = inspect.Signature([
    *inspect.signature(TransformerConfig).parameters.values(),
    inspect.Parameter("name", inspect.Parameter.KEYWORD_ONLY, default="transformer"),
])


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerModel(keras.Model):
    """The encoder-decoder Transformer: a functional `keras.Model` whose parts are typed attributes.

    `build_transformer(...)` returns one; `TransformerModel(config)` builds one from a `TransformerConfig`. Its
    inputs are `{"encoder_inputs", "decoder_inputs"}` int32 `[B, S]` / `[B, T]` (0 = padding), its output float32
    logits `[B, T, tgt_vocab_size]`. Decoding and export use the attributes instead of looking layers up by name,
    as keras-hub's backbones do:

    * `encoder_embedding`, `decoder_embedding`: `PositionalEmbedding` (the same object with `share_embeddings`);
    * `encoder_layers`, `decoder_layers`: lists of `TransformerEncoder` / `TransformerDecoder`;
    * `encoder_final_norm`, `decoder_final_norm`: `LayerNormalization` with `norm_first`, else `None`;
    * `output_projection`: the `OutputProjection` layer, or `None` when tied to the target embedding;
    * `logits_bias`: the `LogitsBias` of a tied projection with `output_bias`, else `None`.

    `config` is its `TransformerConfig`; `get_config()` is that config's fields (and the name), so a saved model is
    rebuilt as this class.

    Example:

    >>> model = TransformerModel(TransformerConfig(100, 120, num_layers=2, d_model=32, num_heads=4, d_ff=64))
    >>> len(model.encoder_layers), model.decoder_embedding.vocab_size, model.output_projection is not None
    (2, 120, True)
    """

    def __init__(self, config, name="transformer", **kwargs):
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"TransformerModel takes a TransformerConfig, got {type(config).__name__} "
                            "(build_transformer takes the settings one by one)")
        encoder_inputs = keras.Input(shape=(None,), dtype="int32", name="encoder_inputs")
        decoder_inputs = keras.Input(shape=(None,), dtype="int32", name="decoder_inputs")
        parts = _Parts(config)
        logits = parts.logits(decoder_inputs, parts.encode(encoder_inputs))
        super().__init__(
            inputs={"encoder_inputs": encoder_inputs, "decoder_inputs": decoder_inputs},
            outputs=logits,
            name=name,
            **kwargs,
        )
        self.config = config
        self.encoder_embedding = parts.encoder_embedding
        self.decoder_embedding = parts.decoder_embedding
        self.encoder_layers = parts.encoder_layers
        self.decoder_layers = parts.decoder_layers
        self.encoder_final_norm = parts.encoder_final_norm
        self.decoder_final_norm = parts.decoder_final_norm
        self.output_projection = parts.output_projection
        self.logits_bias = parts.logits_bias

    def get_config(self):
        return {**self.config.to_dict(), "name": self.name}

    @classmethod
    def from_config(cls, config):
        """Rebuilds the model of `get_config()`: the config's fields, flat, beside the base model's arguments."""
        config = dict(config)
        fields = {field.name for field in dataclasses.fields(TransformerConfig)}
        settings = {name: config.pop(name) for name in list(config) if name in fields}
        return cls(TransformerConfig.from_dict(settings), **config)


class _Parts:
    """The layers of one model, created from its config in the order the functional graph calls them."""

    def __init__(self, config):
        self.config = config
        self.encoder_layers, self.decoder_layers = [], []
        self.encoder_final_norm = self.decoder_final_norm = self.output_projection = self.logits_bias = None
        if config.share_embeddings:
            self.encoder_embedding = self.decoder_embedding = self._embedding(config.src_vocab_size,
                                                                              "shared_embedding")
        else:
            self.encoder_embedding = self._embedding(config.src_vocab_size, "encoder_embedding")
            self.decoder_embedding = self._embedding(config.tgt_vocab_size, "decoder_embedding")

    def _embedding(self, vocab, name):
        c = self.config
        return PositionalEmbedding(vocab, c.d_model, max_length=c.max_length, position=c.position,
                                   scale=c.scale_embeddings, name=name)

    def _block_args(self):
        c = self.config
        return dict(d_model=c.d_model, num_heads=c.num_heads, d_ff=c.d_ff, dropout=c.dropout,
                    attention_dropout=c.attention_dropout, activation_dropout=c.activation_dropout,
                    activation=c.activation, norm_first=c.norm_first, layer_norm_epsilon=c.layer_norm_epsilon,
                    use_bias=c.use_bias, use_rotary=c.use_rotary)

    def _embed(self, embedding, ids, side):
        x = embedding(ids)
        if self.config.word_dropout:
            x = WordDropout(self.config.word_dropout, name=f"{side}_word_dropout")(x)
        return HashDropout(self.config.dropout, name=f"{side}_embedding_dropout")(x)

    def _final_norm(self, side):
        if not self.config.norm_first:
            return None
        return keras.layers.LayerNormalization(epsilon=self.config.layer_norm_epsilon, name=f"{side}_final_norm")

    def encode(self, encoder_inputs):
        x = self._embed(self.encoder_embedding, encoder_inputs, "encoder")
        for i in range(self.config.encoder_layers):
            self.encoder_layers.append(TransformerEncoder(**self._block_args(), name=f"encoder_layer_{i}"))
            x = self.encoder_layers[-1](x)
        self.encoder_final_norm = self._final_norm("encoder")
        return x if self.encoder_final_norm is None else self.encoder_final_norm(x)

    def logits(self, decoder_inputs, encoder_outputs):
        c = self.config
        y = self._embed(self.decoder_embedding, decoder_inputs, "decoder")
        for i in range(c.decoder_layers):
            self.decoder_layers.append(TransformerDecoder(**self._block_args(), name=f"decoder_layer_{i}"))
            y = self.decoder_layers[-1](y, encoder_outputs)
        self.decoder_final_norm = self._final_norm("decoder")
        if self.decoder_final_norm is not None:
            y = self.decoder_final_norm(y)
        if not c.tie_output:
            self.output_projection = OutputProjection(c.tgt_vocab_size, dtype="float32", name="logits")
            return self.output_projection(y)
        logits = self.decoder_embedding(y, reverse=True)
        if c.output_bias:
            self.logits_bias = LogitsBias(c.tgt_vocab_size, c.start_logit_from_padding, name="logits_bias")
            logits = self.logits_bias(logits)
        return logits
