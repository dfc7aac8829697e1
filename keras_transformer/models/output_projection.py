import keras


@keras.saving.register_keras_serializable(package="keras_transformer")
class OutputProjection(keras.layers.Dense):
    """Dense projection to vocabulary logits that ends the Keras mask (the loss masks by label)."""

    def compute_mask(self, inputs, mask=None):
        return None
