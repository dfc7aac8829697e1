"""Names a package loads on first use (PEP 562), so that importing the package stays light."""

import importlib
import sys


def lazy_names(package, exports):
    """`(__all__, __getattr__, __dir__)` for the package module `package`.

    `exports` maps each module to the names it gives the package (`{"keras_transformer.runs.run": ("Run",
    "load_run")}`); a name of `None` is the module itself, under its last dotted part. A name is imported when
    first read, then kept.
    """
    table = {}
    for module_name, names in exports.items():
        for name in names:
            table[name or module_name.rsplit(".", 1)[1]] = (module_name, name)

    def __getattr__(name):
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, attribute = table[name]
        module = importlib.import_module(module_name)
        value = module if attribute is None else getattr(module, attribute)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(table))

    return sorted(table), __getattr__, __dir__
