"""The documentation site (mkdocs.yml, docs/) builds in strict mode: a guide page's broken link, an API reference
directive naming an object that moved, a docstring griffe cannot read or an unresolved cross-reference fails it.

The build reads the package statically (mkdocstrings' griffe) and must not import TensorFlow, Keras, JAX or
PyTorch: it runs here with those imports blocked, and takes seconds.

It needs the `docs` extra (`pip install -e ".[docs]"`). Without it these tests skip, unless `KT_REQUIRE_DOCS=1`
(CI, which installs the extra), where a missing package fails them. Like every test outside the backend-agnostic
directories (tests/conftest.py), they run in the TensorFlow pass only.
"""

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS_PACKAGES = ("mkdocs", "mkdocstrings", "mkdocstrings_handlers.python", "material", "griffe")

# mkdocs' command line in a child process where importing a deep-learning framework raises.
BUILD = """
import sys

class _NoFrameworks:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "keras", "jax", "torch", "tensorflow_text", "keras_hub"):
            raise ImportError(f"the documentation build must not import {name}")
        return None

sys.meta_path.insert(0, _NoFrameworks())
from mkdocs.__main__ import cli
sys.argv = ["mkdocs", *sys.argv[1:]]
cli()
"""


def require_docs_packages():
    missing = [name for name in DOCS_PACKAGES if _missing(name)]
    if not missing:
        return
    message = f"the docs extra is not installed (missing {', '.join(missing)}): pip install -e '.[docs]'"
    if os.environ.get("KT_REQUIRE_DOCS") == "1":
        pytest.fail(f"KT_REQUIRE_DOCS=1 but {message}")
    pytest.skip(message)


def _missing(name):
    try:
        return importlib.util.find_spec(name) is None
    except ModuleNotFoundError:  # a parent package is missing
        return True


def mkdocs_build(config_file, site_dir):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-c", BUILD, "build", "--strict", "--config-file", str(config_file),
                           "--site-dir", str(site_dir)], cwd=os.path.dirname(str(config_file)), env=env,
                          capture_output=True, text=True, timeout=600)


def test_the_site_builds_in_strict_mode(tmp_path):
    require_docs_packages()
    result = mkdocs_build(os.path.join(ROOT, "mkdocs.yml"), tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    for page in ("index.html", "reference/index.html", "reference/layers/index.html",
                 "reference/decoding/index.html", "reference/export/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
    layers = (tmp_path / "site" / "reference" / "layers" / "index.html").read_text(encoding="utf-8")
    assert 'id="keras_transformer.layers.TransformerDecoder"' in layers
    assert "Feature size of inputs and outputs" in layers  # a docstring's Args, rendered


def test_a_broken_reference_fails_the_build(tmp_path):
    # A copy of the site whose reference page cross-references an object that does not exist.
    require_docs_packages()
    shutil.copy(os.path.join(ROOT, "mkdocs.yml"), tmp_path / "mkdocs.yml")
    shutil.copytree(os.path.join(ROOT, "docs"), tmp_path / "docs")
    os.symlink(os.path.join(ROOT, "keras_transformer"), tmp_path / "keras_transformer")
    with open(tmp_path / "docs" / "reference" / "layers.md", "a", encoding="utf-8") as f:
        f.write("\nSee [`NoSuchLayer`][keras_transformer.layers.NoSuchLayer].\n")
    result = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    assert "keras_transformer.layers.NoSuchLayer" in result.stdout + result.stderr


def _guide_nav_hook():
    spec = importlib.util.spec_from_file_location("guide_nav", os.path.join(ROOT, "docs", "reference", "guide_nav.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_guide_nav_follows_the_pages_that_exist(tmp_path):
    # (No mkdocs needed: the hook edits the configuration's nav as a plain list.)
    for name in ("index.md", "training.md", "quality.md", "zeta.md", "reference/layers.md", "topic/page.md"):
        os.makedirs(os.path.dirname(tmp_path / name), exist_ok=True)
        (tmp_path / name).write_text("# Page\n", encoding="utf-8")
    config = {"docs_dir": str(tmp_path), "nav": [
        {"Home": "index.md"},
        {"Guide": [{"Training": "training.md"}, {"Decoding": "decoding.md"}, "quality.md",
                   {"Source": "https://example.org/"}]},
        {"API reference": [{"Layers": "reference/layers.md"}]},
    ]}
    hook = _guide_nav_hook()
    nav = hook.on_config(config)["nav"]
    assert nav[0] == {"Home": "index.md"}
    assert nav[1] == {"Guide": [{"Training": "training.md"}, "quality.md", {"Source": "https://example.org/"},
                                "zeta.md", "topic/page.md"]}
    assert nav[2] == {"API reference": [{"Layers": "reference/layers.md"}]}
    # ... and the home page's list of guide links follows it (a page without a nav title by its heading)
    assert hook.guide_links().splitlines() == [
        "- [Training](training.md)", "- [Page](quality.md)", "- [Source](https://example.org/)", "- [Page](zeta.md)",
        "- [Page](topic/page.md)"]
