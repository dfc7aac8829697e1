"""`TransformerBackbone`: the encoder-decoder Transformer as a keras-hub `Backbone`.

It is `TransformerModel` (the graph `build_transformer` makes: `{"encoder_inputs", "decoder_inputs"}` -> float32
logits) with keras-hub's `Backbone` behind it, so keras-hub's own API works on it:
`keras_hub.models.Backbone.from_preset(dir)`, `save_to_preset`, `enable_lora(rank)` (LoRA on the attention's
`query` and `value` projections) and `quantize("int8")`, whose `DTypePolicyMap` `get_config` keeps, so that a
quantized preset loads back quantized.

Example:

>>> from keras_transformer import TransformerConfig
>>> backbone = TransformerBackbone(TransformerConfig(100, 120, num_layers=1, d_model=32, num_heads=4, d_ff=64))
>>> isinstance(backbone, keras_hub.models.Backbone), backbone.token_embedding is backbone.decoder_embedding
(True, True)
>>> TransformerBackbone.from_config(backbone.get_config()).count_params() == backbone.count_params()
True
"""

import keras
import keras_hub

from keras_transformer.models.transformer import TransformerModel


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerBackbone(TransformerModel, keras_hub.models.Backbone):
    """`TransformerModel` as a keras-hub `Backbone`: a `TransformerConfig`, plus keras-hub's `dtype`.

    `token_embedding` is the target-side `PositionalEmbedding` (tied output projections multiply by its matrix).
    `dtype` may be a `keras.dtype_policies.DTypePolicyMap` from a quantized preset: the layers it names are
    quantized before the weights load.

    Example:

    >>> from keras_transformer import TransformerConfig
    >>> config = TransformerConfig(100, 120, num_layers=1, d_model=32, num_heads=4, d_ff=64)
    >>> backbone = TransformerBackbone(config)
    >>> isinstance(backbone, keras_hub.models.Backbone), sorted(backbone.input)
    (True, ['decoder_inputs', 'encoder_inputs'])
    >>> backbone.enable_lora(2)
    >>> sorted({w.path.rsplit("/", 1)[-1] for w in backbone.trainable_weights})
    ['lora_kernel_a', 'lora_kernel_b']
    """

    def __init__(self, config, dtype=None, **kwargs):
        policy_map = dtype if isinstance(dtype, keras.dtype_policies.DTypePolicyMap) else None
        super().__init__(config, dtype=None if policy_map is not None else dtype, **kwargs)
        self.token_embedding = self.decoder_embedding
        if policy_map is not None:
            self._quantize_as(policy_map)

    def _quantize_as(self, policy_map):
        """Quantizes the layers a saved `DTypePolicyMap` names, the way `quantize()` did before saving."""
        for layer in self._flatten_layers(include_self=False):
            policy = policy_map.get(layer.path) if layer.path in policy_map else None
            mode = getattr(policy, "quantization_mode", None)
            if mode is not None and layer.quantization_mode is None:
                layer.quantize(mode)

    def enable_lora(self, rank, target_layer_names=None):
        """keras-hub's `enable_lora` (LoRA on the attention's `query` and `value` projections), with those
        projections' biases frozen as well: only the LoRA factors train, and every base weight stays as it was."""
        super().enable_lora(rank, target_layer_names=target_layer_names)
        for layer in self._flatten_layers(include_self=False):
            if getattr(layer, "lora_enabled", False) and getattr(layer, "bias", None) is not None:
                layer.bias.trainable = False

    @classmethod
    def from_model(cls, model):
        """A backbone with the settings and weights of a `TransformerModel` (a run's `model`)."""
        if isinstance(model, cls):
            return model
        if not isinstance(model, TransformerModel):
            raise ValueError(f"expected a keras_transformer TransformerModel (from build_transformer or a run), "
                             f"got a {type(model).__name__}")
        backbone = cls(model.config, name=model.name)
        backbone.set_weights(model.get_weights())
        return backbone

    def get_config(self):
        return {**keras_hub.models.Backbone.get_config(self), **self.config.to_dict()}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.get(config["dtype"])
        return super().from_config(config)
