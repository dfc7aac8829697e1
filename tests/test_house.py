"""The house stays one way down: no import circle, no back- or sideways arrow, no private cross-package import, no
file far over 400 lines (tools/house.py explains the layers)."""

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
