"""The house stays one way down: no import circle, no back- or sideways arrow, no private cross-package import, no
file far over 400 lines, no line over 120 characters (tools/house.py explains the layers)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))

import house  # noqa: E402


def test_the_package_imports_one_way_down():
    report = house.analyse(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert report["circles"] == []
    assert report["back_arrows"] == []
    assert report["private"] == []
    largest, module = report["sizes"][0]
    assert largest <= 450, f"{module} has {largest} lines"


def test_every_package_module_has_a_layer():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for module, _ in house.modules(root):
        layer = house.layer_of(module)
        assert layer is None or layer in house.LAYERS, f"{module}: add its package to tools/house.py LAYERS"


def test_no_line_of_the_package_is_over_120_characters():
    # The house's width (what the code was written to): a longer line is one a reader has to scroll for.
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    long_lines = []
    for module, path in house.modules(root):
        with open(path, encoding="utf-8") as f:
            long_lines += [f"{module}:{i}" for i, line in enumerate(f, 1) if len(line.rstrip("\n")) > 120]
    assert long_lines == []


def test_the_product_text_speaks_of_the_product_only():
    """README, docs, the package, the examples and the benchmarks never speak of development sessions, the machines
    that wrote them, lending, or issue numbers (the same check as `grep -rniE "session|slow machine|the VM|lent|issue
    [0-9]"`): a figure names its command and its hardware as a specification."""
    import re

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # ... and an install hint names this project's distribution (`keras-transformer` on PyPI is another project's).
    pattern = re.compile(r"session|slow machine|the VM|lent|issue [0-9]|keras-transformer\[", re.IGNORECASE)
    paths = [os.path.join(root, "README.md")]
    for folder in ("docs", "keras_transformer", "examples", "benchmarks"):
        for directory, _, names in os.walk(os.path.join(root, folder)):
            paths += [os.path.join(directory, n) for n in names if n.endswith((".md", ".py", ".yaml", ".yml", ".sh"))]
    found = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            found += [f"{os.path.relpath(path, root)}:{i}: {line.strip()[:80]}" for i, line in enumerate(f, 1)
                      if pattern.search(line)]
    assert found == []
