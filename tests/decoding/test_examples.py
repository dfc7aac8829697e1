"""The `Example:` sections of the decoding docstrings run and print what they show."""

import doctest
import importlib


def test_docstring_examples_run():
    for module in ("greedy", "beam_search", "sampling", "lru"):
        results = doctest.testmod(importlib.import_module(f"keras_transformer.decoding.{module}"))
        assert results.attempted > 0 and results.failed == 0, module
