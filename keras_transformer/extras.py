"""The optional extras: what a command that needs one says when it is missing (one line, never a traceback).

The distribution on PyPI is `keras-transformer-mt` (the import name is `keras_transformer`); an extra is installed
as `pip install "keras-transformer-mt[hf]"`.
"""

import importlib
import importlib.util

DISTRIBUTION = "keras-transformer-mt"


class MissingExtra(ImportError):
    """A package of an optional extra is not installed; the message names the extra to install."""


def install_hint(extra):
    """The pip command that installs `extra` (`hf`, `jax`, `torch`, `ctranslate2`, `litert`, `docs`)."""
    return f'pip install "{DISTRIBUTION}[{extra}]"'


def missing_extra(what, module, extra):
    """The `MissingExtra` for `what` (a command or option) needing `module`, from `extra`."""
    return MissingExtra(f"{what} needs {module}, which is not installed: {install_hint(extra)}")


def require(module, extra, what):
    """Imports and returns `module`, or raises `missing_extra(what, module, extra)`."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise missing_extra(what, module, extra) from None


def check_installed(module, extra, what):
    """Raises `missing_extra` if `module` cannot be found, without importing it (before a backend is chosen)."""
    if importlib.util.find_spec(module) is None:
        raise missing_extra(what, module, extra)
