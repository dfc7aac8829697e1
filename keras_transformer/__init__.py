"""keras-transformer: encoder-decoder Transformers for Keras 3 that train, decode fast and deploy."""

__version__ = "0.1.0"

from keras_transformer import layers  # noqa: E402
from keras_transformer.models import TransformerConfig, build_transformer  # noqa: E402

__all__ = ["TransformerConfig", "__version__", "build_transformer", "layers"]
