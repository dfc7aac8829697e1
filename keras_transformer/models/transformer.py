"""The encoder-decoder Transformer as a functional Keras model, and its configuration."""

import dataclasses
import json

import keras

from keras_transformer.layers import HashDropout
from keras_transformer.layers import PositionalEmbedding
from keras_transformer.layers import TransformerDecoder
from keras_transformer.layers import TransformerEncoder
from keras_transformer.layers import WordDropout
from keras_transformer.models.output_projection import LogitsBias
from keras_transformer.models.output_projection import OutputProjection
from keras_transformer.validation import check_model


@dataclasses.dataclass
class TransformerConfig:
    """Every setting of `build_transformer`, as a JSON-friendly dataclass.

    Example:

    >>> config = TransformerConfig(src_vocab_size=1000, tgt_vocab_size=1000, num_layers=2, d_model=64)
    >>> TransformerConfig.from_json(config.to_json()) == config
    True
    >>> model = config.build()
    """

    src_vocab_size: int
    tgt_vocab_size: int
    num_layers: int = 6
    d_model: int = 512
    num_heads: int = 8
    d_ff: int = 2048
    dropout: float = 0.1
    max_length: int = 256
    num_encoder_layers: int | None = None
    num_decoder_layers: int | None = None
    attention_dropout: float | None = None
    activation_dropout: float | None = None
    word_dropout: float = 0.0
    activation: str = "relu"
    norm_first: bool = False
    layer_norm_epsilon: float = 1e-6
    position: str = "sinusoidal"
    use_rotary: bool = False
    use_bias: bool = True
    share_embeddings: bool = False
    tie_output: bool = False
    scale_embeddings: bool = True
    output_bias: bool = False
    start_logit_from_padding: int | None = None

    def __post_init__(self):
        # The same rules as the command line (SettingError names the setting, the value and what is allowed).
        check_model(self.to_dict())

    def to_dict(self):
        return dataclasses.asdict(self)

    def to_json(self, indent=2):
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, values):
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"Unknown TransformerConfig settings: {unknown}. Known: {sorted(known)}.")
        return cls(**values)

    @classmethod
    def from_json(cls, text):
        return cls.from_dict(json.loads(text))

    def build(self, name="transformer"):
        values = self.to_dict()
        return build_transformer(**values, name=name)


def build_transformer(
    src_vocab_size,
    tgt_vocab_size,
    num_layers=6,
    d_model=512,
    num_heads=8,
    d_ff=2048,
    dropout=0.1,
    max_length=256,
    num_encoder_layers=None,
    num_decoder_layers=None,
    attention_dropout=None,
    activation_dropout=None,
    word_dropout=0.0,
    activation="relu",
    norm_first=False,
    layer_norm_epsilon=1e-6,
    position="sinusoidal",
    use_rotary=False,
    use_bias=True,
    share_embeddings=False,
    tie_output=False,
    scale_embeddings=True,
    output_bias=False,
    start_logit_from_padding=None,
    name="transformer",
):
    """Build the encoder-decoder Transformer of "Attention Is All You Need" as a functional model.

    Args:
        src_vocab_size: int. Source vocabulary size (id 0 is padding).
        tgt_vocab_size: int. Target vocabulary size (id 0 is padding).
        num_layers: int. Encoder and decoder blocks (6 in the paper).
        d_model: int. Model width (512).
        num_heads: int. Attention heads (8).
        d_ff: int. Feed-forward hidden size (2048).
        dropout: float. Residual, embedding and attention dropout (0.1).
        max_length: int. Longest sequence (sets the learned position table, and decoding caches).
        num_encoder_layers: int. Overrides `num_layers` on the encoder side.
        num_decoder_layers: int. Overrides `num_layers` on the decoder side.
        attention_dropout: float. Dropout on attention weights; defaults to `dropout`.
        activation_dropout: float. Dropout inside the FFN (on its hidden activations); defaults to
            `dropout`. 0 is the paper's block; it also saves the widest random mask of the step.
        word_dropout: float. Fraction of whole tokens dropped from the source and the decoder input in training
            (`WordDropout` after each embedding; Sennrich and Zhang, 2019). 0 (the default) adds no layer.
        activation: str. FFN activation (`"relu"` in the paper).
        norm_first: bool. Pre-norm blocks plus a final layer norm on each side.
        layer_norm_epsilon: float.
        position: str. `"sinusoidal"` (paper), `"sinusoidal_concat"` (Marian's layout), `"sinusoidal_fairseq"`
            (M2M-100's and NLLB's), `"learned"` or `"none"` (with `use_rotary`).
        use_rotary: bool. Rotary position embeddings in self-attention.
        use_bias: bool. Biases in the attention projections.
        share_embeddings: bool. One embedding for source and target (needs equal vocab sizes,
            i.e. a shared subword vocabulary).
        tie_output: bool. Output logits use the target embedding matrix (paper section 3.4).
        scale_embeddings: bool. Multiply token embeddings by `sqrt(d_model)` (paper section 3.4).
        output_bias: bool. Add a bias to tied output logits (`LogitsBias`, not trained; Marian's
            `final_logits_bias`). An untied output projection always has a trained bias.
        start_logit_from_padding: int or `None`. With `output_bias`, the logit at this id (the decoder's start
            token) is the padding id's (see `LogitsBias`): for imported models whose decoder starts from `</s>`.
        name: str. Model name.

    Returns:
        A functional `keras.Model` taking `{"encoder_inputs": int32 [B, S],
        "decoder_inputs": int32 [B, T]}` and returning float32 logits `[B, T, tgt_vocab_size]`.

    Example:

    >>> model = build_transformer(1000, 1000, num_layers=2, d_model=64, num_heads=4, d_ff=128)
    >>> sorted(model.input.keys())
    ['decoder_inputs', 'encoder_inputs']
    """
    return TransformerModel(
        src_vocab_size,
        tgt_vocab_size,
        num_layers=num_layers,
        d_model=d_model,
        num_heads=num_heads,
        d_ff=d_ff,
        dropout=dropout,
        max_length=max_length,
        num_encoder_layers=num_encoder_layers,
        num_decoder_layers=num_decoder_layers,
        attention_dropout=attention_dropout,
        activation_dropout=activation_dropout,
        word_dropout=word_dropout,
        activation=activation,
        norm_first=norm_first,
        layer_norm_epsilon=layer_norm_epsilon,
        position=position,
        use_rotary=use_rotary,
        use_bias=use_bias,
        share_embeddings=share_embeddings,
        tie_output=tie_output,
        scale_embeddings=scale_embeddings,
        output_bias=output_bias,
        start_logit_from_padding=start_logit_from_padding,
        name=name,
    )


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerModel(keras.Model):
    """The encoder-decoder Transformer: a functional `keras.Model` whose parts are typed attributes.

    `build_transformer(...)` returns one (same arguments). Its inputs are `{"encoder_inputs", "decoder_inputs"}`
    int32 `[B, S]` / `[B, T]` (0 = padding), its output float32 logits `[B, T, tgt_vocab_size]`. Decoding and export
    use the attributes instead of looking layers up by name, as keras-hub's backbones do:

    * `encoder_embedding`, `decoder_embedding`: `PositionalEmbedding` (the same object with `share_embeddings`);
    * `encoder_layers`, `decoder_layers`: lists of `TransformerEncoder` / `TransformerDecoder`;
    * `encoder_final_norm`, `decoder_final_norm`: `LayerNormalization` with `norm_first`, else `None`;
    * `output_projection`: the `OutputProjection` layer, or `None` when tied to the target embedding;
    * `logits_bias`: the `LogitsBias` of a tied projection with `output_bias`, else `None`.

    `get_config()` is its settings (what `TransformerConfig` holds), so a saved model is rebuilt as this class.

    Example:

    >>> model = TransformerModel(100, 120, num_layers=2, d_model=32, num_heads=4, d_ff=64)
    >>> len(model.encoder_layers), model.decoder_embedding.vocab_size, model.output_projection is not None
    (2, 120, True)
    """

    def __init__(
        self,
        src_vocab_size,
        tgt_vocab_size,
        num_layers=6,
        d_model=512,
        num_heads=8,
        d_ff=2048,
        dropout=0.1,
        max_length=256,
        num_encoder_layers=None,
        num_decoder_layers=None,
        attention_dropout=None,
        activation_dropout=None,
        word_dropout=0.0,
        activation="relu",
        norm_first=False,
        layer_norm_epsilon=1e-6,
        position="sinusoidal",
        use_rotary=False,
        use_bias=True,
        share_embeddings=False,
        tie_output=False,
        scale_embeddings=True,
        output_bias=False,
        start_logit_from_padding=None,
        name="transformer",
        **kwargs,
    ):
        settings = dict(
            src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, num_layers=num_layers, d_model=d_model,
            num_heads=num_heads, d_ff=d_ff, dropout=dropout, max_length=max_length,
            num_encoder_layers=num_encoder_layers, num_decoder_layers=num_decoder_layers,
            attention_dropout=attention_dropout, activation_dropout=activation_dropout, word_dropout=word_dropout,
            activation=activation,
            norm_first=norm_first, layer_norm_epsilon=layer_norm_epsilon, position=position, use_rotary=use_rotary,
            use_bias=use_bias, share_embeddings=share_embeddings, tie_output=tie_output,
            scale_embeddings=scale_embeddings, output_bias=output_bias,
            start_logit_from_padding=start_logit_from_padding,
        )
        check_model(settings)
        n_enc = num_layers if num_encoder_layers is None else num_encoder_layers
        n_dec = num_layers if num_decoder_layers is None else num_decoder_layers
        block_args = dict(
            d_model=d_model,
            num_heads=num_heads,
            d_ff=d_ff,
            dropout=dropout,
            attention_dropout=attention_dropout,
            activation_dropout=activation_dropout,
            activation=activation,
            norm_first=norm_first,
            layer_norm_epsilon=layer_norm_epsilon,
            use_bias=use_bias,
            use_rotary=use_rotary,
        )
        encoder_layers, decoder_layers = [], []
        encoder_final_norm = decoder_final_norm = output_projection = logits_bias = None
        encoder_inputs = keras.Input(shape=(None,), dtype="int32", name="encoder_inputs")
        decoder_inputs = keras.Input(shape=(None,), dtype="int32", name="decoder_inputs")

        def embedding(vocab, layer_name):
            return PositionalEmbedding(vocab, d_model, max_length=max_length, position=position,
                                       scale=scale_embeddings, name=layer_name)

        if share_embeddings:
            src_embedding = tgt_embedding = embedding(src_vocab_size, "shared_embedding")
        else:
            src_embedding = embedding(src_vocab_size, "encoder_embedding")
            tgt_embedding = embedding(tgt_vocab_size, "decoder_embedding")

        x = src_embedding(encoder_inputs)
        if word_dropout:
            x = WordDropout(word_dropout, name="encoder_word_dropout")(x)
        x = HashDropout(dropout, name="encoder_embedding_dropout")(x)
        for i in range(n_enc):
            encoder_layers.append(TransformerEncoder(**block_args, name=f"encoder_layer_{i}"))
            x = encoder_layers[-1](x)
        if norm_first:
            encoder_final_norm = keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, name="encoder_final_norm")
            x = encoder_final_norm(x)
        encoder_outputs = x

        y = tgt_embedding(decoder_inputs)
        if word_dropout:
            y = WordDropout(word_dropout, name="decoder_word_dropout")(y)
        y = HashDropout(dropout, name="decoder_embedding_dropout")(y)
        for i in range(n_dec):
            decoder_layers.append(TransformerDecoder(**block_args, name=f"decoder_layer_{i}"))
            y = decoder_layers[-1](y, encoder_outputs)
        if norm_first:
            decoder_final_norm = keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, name="decoder_final_norm")
            y = decoder_final_norm(y)
        if tie_output:
            logits = tgt_embedding(y, reverse=True)
            if output_bias:
                logits_bias = LogitsBias(tgt_vocab_size, start_logit_from_padding, name="logits_bias")
                logits = logits_bias(logits)
        else:
            output_projection = OutputProjection(tgt_vocab_size, dtype="float32", name="logits")
            logits = output_projection(y)
        super().__init__(
            inputs={"encoder_inputs": encoder_inputs, "decoder_inputs": decoder_inputs},
            outputs=logits,
            name=name,
            **kwargs,
        )
        self._transformer_settings = settings
        self.encoder_embedding = src_embedding
        self.decoder_embedding = tgt_embedding
        self.encoder_layers = encoder_layers
        self.decoder_layers = decoder_layers
        self.encoder_final_norm = encoder_final_norm
        self.decoder_final_norm = decoder_final_norm
        self.output_projection = output_projection
        self.logits_bias = logits_bias

    def get_config(self):
        return {**self._transformer_settings, "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
