"""`TransformerConfig`: the one place a model setting is declared, documented, checked and serialized.

Each field carries its rule (what values it takes, checked when a config is built, with the same message the
command line gives) and, for the settings `train` has a flag for, that flag's help text. `build_transformer`,
`TransformerModel`, `TransformerBackbone`, the command line and a run's `config.json` all take or produce this
object, so a new model option is one field here (and its use in the model). This module imports no Keras: the
command line checks its flags against it before TensorFlow loads.
"""

import dataclasses
import json

from keras_transformer.validation import SettingError
from keras_transformer.validation import check_known
from keras_transformer.validation import choice_rule
from keras_transformer.validation import flag_rule
from keras_transformer.validation import int_rule
from keras_transformer.validation import number_rule
from keras_transformer.validation import rate_rule
from keras_transformer.validation import rules_of
from keras_transformer.validation import setting

# Longest sequence the models are tested with; longer needs more memory than any default batch allows.
MAX_LENGTH_LIMIT = 65_536
ACTIVATIONS = ("relu", "gelu", "silu", "swish", "elu", "selu", "tanh", "sigmoid", "linear", "leaky_relu", "relu6",
               "mish", "softplus")
POSITIONS = ("sinusoidal", "sinusoidal_concat", "sinusoidal_fairseq", "learned", "none")


@dataclasses.dataclass
class TransformerConfig:
    """Every setting of the encoder-decoder Transformer, checked when built (`SettingError`), as JSON.

    Example:

    >>> config = TransformerConfig(src_vocab_size=1000, tgt_vocab_size=1000, num_layers=2, d_model=64)
    >>> TransformerConfig.from_json(config.to_json()) == config
    True
    >>> TransformerConfig(1000, 1000, num_layers=0)
    Traceback (most recent call last):
    ...
    keras_transformer.validation.SettingError: num_layers (--num-layers) = 0: must be an integer >= 1 and <= 1000
    """

    src_vocab_size: int = setting(rule=int_rule(5))
    """Source vocabulary size (id 0 is padding)."""
    tgt_vocab_size: int = setting(rule=int_rule(5))
    """Target vocabulary size (id 0 is padding)."""
    num_layers: int = setting(6, int_rule(1, 1000), flag="encoder and decoder blocks")
    """Encoder and decoder blocks (6 in the paper)."""
    d_model: int = setting(512, int_rule(1, 1_000_000), flag="model width")
    """Model width (512)."""
    num_heads: int = setting(8, int_rule(1, 10_000), flag="attention heads")
    """Attention heads (8); `d_model` must be divisible by it."""
    d_ff: int = setting(2048, int_rule(1, 10_000_000), flag="feed-forward hidden size")
    """Feed-forward hidden size (2048)."""
    dropout: float = setting(0.1, rate_rule(), flag="dropout rate")
    """Residual, embedding and attention dropout (0.1)."""
    max_length: int = setting(256, int_rule(2, MAX_LENGTH_LIMIT),
                              flag="longest sequence in tokens (longer sentences are truncated)")
    """Longest sequence (sets the learned position table, and decoding caches)."""
    num_encoder_layers: int | None = setting(None, int_rule(1, 1000, optional=True))
    """Overrides `num_layers` on the encoder side."""
    num_decoder_layers: int | None = setting(None, int_rule(1, 1000, optional=True))
    """Overrides `num_layers` on the decoder side."""
    attention_dropout: float | None = setting(None, rate_rule(optional=True),
                                              flag="dropout on the attention weights (default: --dropout)")
    """Dropout on attention weights; defaults to `dropout`."""
    activation_dropout: float | None = setting(None, rate_rule(optional=True),
                                               flag="dropout inside the feed-forward networks (default: --dropout)")
    """Dropout inside the FFN (on its hidden activations); defaults to `dropout`. 0 is the paper's block; it also
    saves the widest random mask of the step."""
    word_dropout: float = setting(0.0, rate_rule(), flag="fraction of whole source and target-input tokens dropped "
                                                         "in training (default 0)")
    """Fraction of whole tokens dropped from the source and the decoder input in training (`WordDropout` after
    each embedding; Sennrich and Zhang, 2019). 0 adds no layer."""
    activation: str = setting("relu", choice_rule(ACTIVATIONS))
    """FFN activation (`"relu"` in the paper)."""
    norm_first: bool = setting(False, flag_rule(), flag="pre-norm blocks")
    """Pre-norm blocks plus a final layer norm on each side."""
    layer_norm_epsilon: float = setting(1e-6, number_rule(above=0, below=1))
    """Epsilon of every layer normalization."""
    position: str = setting("sinusoidal", choice_rule(POSITIONS))
    """`"sinusoidal"` (paper), `"sinusoidal_concat"` (Marian's layout), `"sinusoidal_fairseq"` (M2M-100's and
    NLLB's), `"learned"` or `"none"` (with `use_rotary`)."""
    use_rotary: bool = setting(False, flag_rule())
    """Rotary position embeddings in self-attention."""
    use_bias: bool = setting(True, flag_rule())
    """Biases in the attention projections."""
    share_embeddings: bool = setting(False, flag_rule(),
                                     flag="one embedding for source and target (implies --shared-vocab)")
    """One embedding for source and target (needs equal vocab sizes, i.e. a shared subword vocabulary)."""
    tie_output: bool = setting(False, flag_rule(), flag="output projection tied to the target embedding")
    """Output logits use the target embedding matrix (paper section 3.4)."""
    scale_embeddings: bool = setting(True, flag_rule())
    """Multiply token embeddings by `sqrt(d_model)` (paper section 3.4)."""
    output_bias: bool = setting(False, flag_rule())
    """Add a bias to tied output logits (`LogitsBias`, not trained; Marian's `final_logits_bias`). An untied output
    projection always has a trained bias."""
    start_logit_from_padding: int | None = setting(None, int_rule(1, 100_000_000, optional=True))
    """With `output_bias`, the logit at this id (the decoder's start token) is the padding id's (see
    `LogitsBias`): for imported models whose decoder starts from `</s>`."""

    def __post_init__(self):
        check_model(self.to_dict())

    def to_dict(self):
        return dataclasses.asdict(self)

    def to_json(self, indent=2):
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, values):
        unknown = sorted(set(values) - set(MODEL_RULES))
        if unknown:
            raise SettingError(f"unknown model setting {unknown[0]!r}: model settings are {', '.join(MODEL_RULES)}")
        return cls(**values)

    @classmethod
    def from_json(cls, text):
        return cls.from_dict(json.loads(text))

    @property
    def encoder_layers(self):
        return self.num_layers if self.num_encoder_layers is None else self.num_encoder_layers

    @property
    def decoder_layers(self):
        return self.num_layers if self.num_decoder_layers is None else self.num_decoder_layers


MODEL_RULES = rules_of(TransformerConfig)


def check_model(values):
    """Checks `TransformerConfig` fields (a dict; missing ones take their defaults) and their combinations."""
    check_known(values, MODEL_RULES)
    d_model, heads = values.get("d_model", 512), values.get("num_heads", 8)
    if d_model % heads:
        raise SettingError(f"d_model (--d-model) = {d_model}: must be divisible by num_heads (--num-heads) = "
                           f"{heads}")
    if values.get("use_rotary") and (d_model // heads) % 2:
        raise SettingError(f"use_rotary = True: needs an even head size, but d_model / num_heads = {d_model // heads}")
    if values.get("position") == "none" and not values.get("use_rotary"):
        raise SettingError("position = 'none': needs use_rotary = True (else the model sees no word order)")
    if values.get("share_embeddings") and "src_vocab_size" in values and \
            values["src_vocab_size"] != values.get("tgt_vocab_size"):
        raise SettingError(f"share_embeddings = True: needs one shared vocabulary, but src_vocab_size = "
                           f"{values['src_vocab_size']} != tgt_vocab_size = {values.get('tgt_vocab_size')}")
    start = values.get("start_logit_from_padding")
    if start is not None and not (values.get("tie_output") and values.get("output_bias")):
        raise SettingError(f"start_logit_from_padding = {start}: needs tie_output = True and output_bias = True "
                           "(the tied projection's LogitsBias sets that logit)")
    if start is not None and "tgt_vocab_size" in values and start >= values["tgt_vocab_size"]:
        raise SettingError(f"start_logit_from_padding = {start}: must be a target id below tgt_vocab_size = "
                           f"{values['tgt_vocab_size']}")
