"""What a preset path may be besides a keras-hub preset: a pretrained checkpoint to import, or an older layout.

* `is_checkpoint(source)`: a directory in the Hugging Face layout (a Marian checkpoint), or `hf://OWNER/NAME` unless
  that repository's `config.json` is a keras-hub preset's (`upload_preset` put it there);
  `imported_run(source)` imports it once into a cache (`$KERAS_TRANSFORMER_CACHE`, default
  `~/.cache/keras_transformer/`) and returns the run directory.
* `named_preset(name)`: the checkpoint behind a keras-hub-style preset name (`"nllb_200_distilled_600m"`,
  `"m2m100_418m"`, `"opus_mt_de_en"` for any OPUS-MT pair), as `hf://OWNER/NAME`.
* `check_preset(path)`: raises `PresetError` in one line for a preset that keras-hub cannot load, naming the file
  and how to re-export it (a preset of the older layout, whose `config.json` is a plain `TransformerModel`).
"""

import hashlib
import json
import os

OLD_LAYOUT_FIX = "re-export it from its run with `keras-transformer export RUN --preset DIR --overwrite`"


# keras-hub-style names -> Hugging Face Hub checkpoints (imported on first use); `opus_mt_SRC_TGT` names any OPUS-MT
# pair (Helsinki-NLP/opus-mt-SRC-TGT).
NAMED_PRESETS = {
    "nllb_200_distilled_600m": "facebook/nllb-200-distilled-600M",
    "nllb_200_distilled_1.3b": "facebook/nllb-200-distilled-1.3B",
    "nllb_200_1.3b": "facebook/nllb-200-1.3B",
    "nllb_200_3.3b": "facebook/nllb-200-3.3B",
    "m2m100_418m": "facebook/m2m100_418M",
    "m2m100_1.2b": "facebook/m2m100_1.2B",
}
_OPUS_MT = "opus_mt_"


def named_preset(name):
    """`hf://OWNER/NAME` of a preset name (`NAMED_PRESETS`, or `opus_mt_SRC_TGT`), else `None` (a local path that
    exists is never a name)."""
    name = os.fspath(name)
    if os.path.exists(name) or "/" in name or "://" in name:
        return None
    if name in NAMED_PRESETS:
        return f"hf://{NAMED_PRESETS[name]}"
    pair = name[len(_OPUS_MT):].split("_") if name.startswith(_OPUS_MT) else []
    if len(pair) == 2 and all(part.replace("-", "").isalnum() for part in pair):
        return f"hf://Helsinki-NLP/opus-mt-{pair[0]}-{pair[1]}"
    return None


class PresetError(ValueError):
    """A preset directory that cannot be loaded (the message names the file and what to do)."""


def is_checkpoint(source):
    """Whether `source` is a pretrained checkpoint to import (a hub id, or a Hugging Face layout directory)."""
    from keras_transformer.importers import HUB_PREFIX

    source = os.fspath(source)
    if source.startswith(HUB_PREFIX):
        return not _is_keras_preset(_hub_config(source))
    return os.path.isfile(os.path.join(source, "config.json")) and not os.path.exists(os.path.join(source, "task.json"))


def _is_keras_preset(config):
    """Whether a `config.json` is a serialized Keras object (a keras-hub preset) rather than a transformers one."""
    return isinstance(config, dict) and "registered_name" in config


def _hub_config(source):
    """The `config.json` of a Hugging Face Hub repository (`hf://OWNER/NAME[@REVISION]`), or `None` when it cannot
    be read here (no `huggingface_hub`, no network): the importer then says what is missing."""
    from keras_transformer.importers import HUB_PREFIX

    repo, _, revision = source[len(HUB_PREFIX):].partition("@")
    try:
        import huggingface_hub

        path = huggingface_hub.hf_hub_download(repo, "config.json", revision=revision or None)
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except Exception:  # noqa: BLE001 - any failure here is reported by the importer, which tries again
        return None


def imported_run(source):
    """The run directory of an imported checkpoint, imported on first use into the cache."""
    from keras_transformer.importers import import_checkpoint

    cache = os.environ.get("KERAS_TRANSFORMER_CACHE") or os.path.join(os.path.expanduser("~"), ".cache",
                                                                         "keras_transformer")
    key = source
    if "://" not in source:  # a local directory: a changed file is a new import
        key = os.path.abspath(source) + "".join(
            f"|{entry.name}:{entry.stat().st_size}:{entry.stat().st_mtime_ns}" for entry in
            sorted(os.scandir(source), key=lambda entry: entry.name) if entry.is_file())
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in source.split("://")[-1].rstrip("/"))[-60:]
    run_dir = os.path.join(cache, "imported", f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}")
    if not os.path.exists(os.path.join(run_dir, "model.keras")):
        import_checkpoint(source, run_dir, overwrite=os.path.isdir(run_dir), verbose=0)
    return run_dir


def check_preset(path):
    """Raises `PresetError` (one line) when the local preset `path` is missing its config or is of the older
    layout; remote presets and valid ones pass."""
    if "://" in path:
        return
    config_path = os.path.join(path, "config.json")
    if not os.path.isfile(config_path):
        raise PresetError(f"{config_path}: missing; {path} is not a preset (write one with "
                          "`keras-transformer export RUN --preset DIR`)")
    try:
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise PresetError(f"{config_path}: damaged or not JSON ({error})") from None
    if isinstance(config, dict) and config.get("registered_name") == "keras_transformer>TransformerModel":
        raise PresetError(f"{path}: a preset of an older keras-transformer layout (its config.json is a "
                          f"TransformerModel, not a TransformerBackbone); {OLD_LAYOUT_FIX}")


def check_generation_limits(config):
    """Raises `PresetError` (one line naming `task.json`) when a preset's task config asks for more than decoding
    should spend: a sampler's `num_beams` over `MAX_BEAMS`, or sequence lengths past the model's positions."""
    from keras_transformer.decoding.tuning import MAX_BEAMS

    def settings(name):
        value = config.get(name)
        return value.get("config", {}) if isinstance(value, dict) else getattr(value, "get_config", dict)()

    beams = settings("sampler").get("num_beams")
    if beams is not None and (isinstance(beams, bool) or not isinstance(beams, int) or not 1 <= beams <= MAX_BEAMS):
        raise PresetError(f"task.json: sampler num_beams {beams!r}: expected an integer from 1 to {MAX_BEAMS} (beams "
                          "wider than that cost more memory per sentence than any server allows)")
    positions = settings("backbone").get("max_length")
    for name in ("encoder_sequence_length", "decoder_sequence_length"):
        length = settings("preprocessor").get(name)
        if positions is not None and length is not None and not 1 <= int(length) <= int(positions):
            raise PresetError(f"task.json: preprocessor {name} {length!r}: expected at most the model's max_length "
                              f"({positions} positions)")

