"""An HTTP server with TF Serving's REST API over any artifact `keras_transformer.load_translator` takes.

`keras-transformer serve ARTIFACT` runs it; in Python, `start_server(load_served_model(path))` starts one in a
thread. See docs/serving.md for the routes, the request and response formats, batching and the limits.
The names below load on first use (`ServerSettings` alone imports no web framework).
"""

import importlib

from keras_transformer.serving.settings import ServerSettings

_LAZY = {
    "create_app": "keras_transformer.serving.app",
    "Batcher": "keras_transformer.serving.batching",
    "SIGNATURES": "keras_transformer.serving.protocol",
    "RequestError": "keras_transformer.serving.protocol",
    "ServedModel": "keras_transformer.serving.served_model",
    "RunningServer": "keras_transformer.serving.server",
    "load_served_model": "keras_transformer.serving.server",
    "serve": "keras_transformer.serving.server",
    "start_server": "keras_transformer.serving.server",
    "warm_up": "keras_transformer.serving.server",
    "warm_up_shapes": "keras_transformer.serving.server",
}

__all__ = ["ServerSettings", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
