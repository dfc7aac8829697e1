"""An HTTP server with TF Serving's REST API over any artifact `keras_transformer.load_translator` takes.

`keras-transformer serve ARTIFACT` runs it; in Python, `start_server(load_served_model(path))` starts one in a
thread. See docs/serving.md for the routes, the request and response formats, batching and the limits.
The names below load on first use (`ServerSettings` alone imports no web framework).
"""

from keras_transformer.lazy import lazy_names
from keras_transformer.serving.settings import ServerSettings

_EXPORTS = {
    "keras_transformer.serving.app": ("create_app",),
    "keras_transformer.serving.batching": ("Batcher",),
    "keras_transformer.serving.protocol": ("SIGNATURES", "RequestError"),
    "keras_transformer.serving.served_model": ("ServedModel",),
    "keras_transformer.serving.server": (
        "RunningServer", "load_served_model", "serve", "start_server", "warm_up", "warm_up_shapes",
    ),
}

_LAZY_NAMES, __getattr__, __dir__ = lazy_names(__name__, _EXPORTS)
__all__ = ["ServerSettings", *_LAZY_NAMES]
