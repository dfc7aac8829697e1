"""`TransformerSeq2SeqLM`: a translation model as one object, with keras-hub's task conventions.

It holds the model (the "backbone") and its tokenizers, translates with `generate()`, and saves to and loads from a
preset directory in keras-hub's layout, so that `keras_hub.upload_preset(uri, directory)` can publish it:

    preset/
      config.json          the backbone: `keras.saving.serialize_keras_object(model)` (module, class_name, config,
                           registered_name), the way keras-hub writes a backbone's config
      model.weights.h5     the backbone's weights
      task.json            this class, its decoding settings and the model's `TransformerConfig`
      tokenizer.json       the tokenizers (class, config) and their asset files
      assets/tokenizer/    source/ (and target/ unless the vocabulary is shared): vocab.txt + tokenizer.json
      preprocessor.json    how sources are packed (`[START] ids[:max_length - 2] [END]`, 0-padded)
      metadata.json        keras, keras-transformer (and keras-hub, if installed) versions, parameters, date

A preset is written to a temporary directory and renamed into place (never half-written).
"""

import datetime
import json
import os

import keras

from keras_transformer.atomic import atomic_path
from keras_transformer.data.tokenizers import load_tokenizer
from keras_transformer.decoding.base_translator import BaseTranslator
from keras_transformer.decoding.samplers import get_sampler
from keras_transformer.decoding.samplers import serialize_sampler
from keras_transformer.decoding.translator import Translator
from keras_transformer.decoding.translator import sampler_for
from keras_transformer.models import TransformerConfig

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
TASK_FILE = "task.json"
TOKENIZER_FILE = "tokenizer.json"
PREPROCESSOR_FILE = "preprocessor.json"
METADATA_FILE = "metadata.json"
TOKENIZER_ASSETS = os.path.join("assets", "tokenizer")
_REGISTERED_NAME = "keras_transformer>TransformerSeq2SeqLM"


class PresetError(ValueError):
    """A preset directory that cannot be loaded (the message names the file)."""


class TransformerSeq2SeqLM(BaseTranslator):
    """A trained encoder-decoder Transformer with its tokenizers: `generate()` text, save and load presets.

    Args:
        backbone: the `keras.Model` from `build_transformer` (or a loaded run's `model`).
        source_tokenizer: its source tokenizer (a `SubwordTokenizer`, or an imported checkpoint's
            `SentencePieceTokenizer`).
        target_tokenizer: its target tokenizer, of the same kind (the same object for a shared vocabulary).
        sampler: the default decoding, a `keras_transformer.decoding.samplers` name, dict or object ("greedy").
        max_length: most output tokens; default the model's `max_length`.
        model_config: the `TransformerConfig` the backbone was built from (kept in the preset), if known.

    Example (`run_dir` is a directory written by `train`, `tmp` an empty directory):

    >>> task = TransformerSeq2SeqLM.from_run(run_dir)
    >>> path = task.save_to_preset(os.path.join(tmp, "dates-preset"))
    >>> loaded = TransformerSeq2SeqLM.from_preset(path)
    >>> sentence = "the first of May, nineteen ninety-nine"
    >>> loaded.generate(sentence) == task.generate(sentence)
    True
    """

    def __init__(self, backbone, source_tokenizer, target_tokenizer, sampler="greedy", max_length=None,
                 model_config=None):
        self.backbone = backbone
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.sampler = get_sampler(sampler)
        self.model_config = model_config
        self.translator = Translator(backbone, source_tokenizer, target_tokenizer, max_length=max_length)

    @classmethod
    def from_run(cls, run, **kwargs):
        """The task of a `Run` or of a run directory written by `train`."""
        if isinstance(run, (str, os.PathLike)):
            from keras_transformer.runs.run import load_run

            run = load_run(run)
        return cls(run.model, run.source_tokenizer, run.target_tokenizer, model_config=run.model_config, **kwargs)

    def generate(self, inputs, sampler=None, max_length=None, batch_size=32):
        """Translates a string (returns a string) or a list of strings (returns a list), like keras-hub's
        `Seq2SeqLM.generate`. `sampler` overrides the task's default for this call."""
        single = isinstance(inputs, (str, bytes))
        texts = [inputs] if single else list(inputs)
        outputs = self.translator.translate_with_sampler(texts, self.sampler if sampler is None else sampler,
                                                         batch_size=batch_size, max_length=max_length)
        return outputs[0] if single else outputs

    def translate(self, texts, beam_size=None, length_penalty=None, batch_size=32, max_length=None, verbose=0):
        """The `translate` of every translator (`BaseTranslator`; what `keras-transformer translate` calls).

        `beam_size` and `length_penalty` `None` decode with the task's `sampler`; otherwise greedy (`beam_size=1`)
        or beam search (keeping the sampler's length penalty and its rule if it is a `BeamSampler`).
        """
        return self.translator.translate_with_sampler(texts, sampler_for(self.sampler, beam_size, length_penalty),
                                                      batch_size=batch_size, max_length=max_length, verbose=verbose)

    def plot_attention(self, text, path, beam_size=None, layer_index=-1):
        """A heat map of the cross-attention for one sentence (see `Translator.plot_attention`)."""
        sampler = sampler_for(self.sampler, beam_size)
        return self.translator.plot_attention(text, path, beam_size=getattr(sampler, "num_beams", 1),
                                              layer_index=layer_index)

    # ------------------------------------------------------------------------------------------------------------
    # Presets.

    def save_to_preset(self, preset_dir, overwrite=False):
        """Writes the task to `preset_dir` in keras-hub's preset layout (see the module's doc); returns the path.

        Raises:
            FileExistsError: `preset_dir` exists and `overwrite` is not set.
        """
        if os.path.lexists(preset_dir) and not overwrite:
            raise FileExistsError(f"{preset_dir}: exists; pass overwrite=True (--overwrite) to replace it")
        shared = self.source_tokenizer is self.target_tokenizer
        sides = ["source"] if shared else ["source", "target"]
        with atomic_path(preset_dir) as temporary:
            os.makedirs(temporary)
            _write_json(temporary, CONFIG_FILE, keras.saving.serialize_keras_object(self.backbone))
            self.backbone.save_weights(os.path.join(temporary, WEIGHTS_FILE))
            for side in sides:
                tokenizer = self.source_tokenizer if side == "source" else self.target_tokenizer
                tokenizer.save(os.path.join(temporary, TOKENIZER_ASSETS, side))
            kind = type(self.source_tokenizer)
            _write_json(temporary, TOKENIZER_FILE, {
                "module": kind.__module__,
                "class_name": kind.__name__,
                "config": {"shared": shared},
                "registered_name": f"keras_transformer>{kind.__name__}",
                "assets": sorted(os.path.join(TOKENIZER_ASSETS, side, name).replace(os.sep, "/") for side in sides
                                 for name in os.listdir(os.path.join(temporary, TOKENIZER_ASSETS, side))),
            })
            _write_json(temporary, TASK_FILE, {
                "module": __name__,
                "class_name": type(self).__name__,
                "config": {
                    "sampler": serialize_sampler(self.sampler),
                    "max_length": self.translator.max_length,
                    "model": self.model_config.to_dict() if self.model_config is not None else None,
                },
                "registered_name": _REGISTERED_NAME,
            })
            _write_json(temporary, PREPROCESSOR_FILE, {
                "source_sequence_length": int(self.translator.parts.max_length),
                "packer": ("[START] ids[:source_sequence_length - 2] [END], 0-padded"
                           if self.source_tokenizer.source_start_id is not None
                           else "ids[:source_sequence_length - 1] [END], 0-padded"),
                "start_id": self.source_tokenizer.source_start_id,
                "end_id": self.source_tokenizer.end_id,
                "pad_id": self.source_tokenizer.pad_id,
            })
            _write_json(temporary, METADATA_FILE, _metadata(self.backbone))
        return preset_dir

    @classmethod
    def from_preset(cls, preset_dir, **kwargs):
        """Loads a task saved by `save_to_preset` (in a fresh process too: the layers register on import), or a
        pretrained Marian (OPUS-MT) checkpoint: `hf://OWNER/NAME` or a directory in the Hugging Face layout,
        imported once (`keras_transformer.importers.import_marian`) into a cache (`$KERAS_TRANSFORMER_CACHE`,
        default `~/.cache/keras_transformer/imported/`) and loaded from there.

        Raises:
            PresetError: a file of the preset is missing or damaged (naming it).
            CheckpointError: a checkpoint that cannot be imported.
        """
        import keras_transformer.models  # noqa: F401 - registers the layers for deserialization

        if _is_checkpoint(preset_dir):
            return cls.from_run(_imported_run(os.fspath(preset_dir)), **kwargs)

        for name in (CONFIG_FILE, WEIGHTS_FILE, TASK_FILE, TOKENIZER_FILE):
            if not os.path.exists(os.path.join(preset_dir, name)):
                raise PresetError(f"{os.path.join(preset_dir, name)}: missing; {preset_dir} is not a preset written "
                                  "by TransformerSeq2SeqLM.save_to_preset")
        config = _read_json(preset_dir, CONFIG_FILE)
        task = _read_json(preset_dir, TASK_FILE)
        tokenizers = _read_json(preset_dir, TOKENIZER_FILE)
        try:
            backbone = keras.saving.deserialize_keras_object(config)
            backbone.load_weights(os.path.join(preset_dir, WEIGHTS_FILE))
        except Exception as error:  # noqa: BLE001 - Keras and HDF5 errors alike mean a damaged preset
            raise PresetError(f"{preset_dir}: the model does not load from {CONFIG_FILE} + {WEIGHTS_FILE} "
                              f"({type(error).__name__}: {str(error).splitlines()[0][:200]})") from None
        source = load_tokenizer(os.path.join(preset_dir, TOKENIZER_ASSETS, "source"))
        shared = tokenizers.get("config", {}).get("shared", False)
        target = source if shared else load_tokenizer(os.path.join(preset_dir, TOKENIZER_ASSETS, "target"))
        settings = task.get("config", {})
        model = settings.get("model")
        arguments = {"sampler": settings.get("sampler", "greedy"), "max_length": settings.get("max_length"),
                     "model_config": TransformerConfig.from_dict(model) if model else None, **kwargs}
        return cls(backbone, source, target, **arguments)


def _write_json(directory, name, value):
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2)
        f.write("\n")


def _read_json(directory, name):
    path = os.path.join(directory, name)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise PresetError(f"{path}: damaged or not JSON ({error})") from None


def _metadata(backbone):
    from keras_transformer import __version__

    metadata = {
        "keras_version": keras.version(),
        "keras_transformer_version": __version__,
        "parameter_count": backbone.count_params(),
        "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
    }
    try:
        from keras_hub import __version__ as keras_hub_version

        metadata["keras_hub_version"] = keras_hub_version
    except ImportError:
        pass
    return metadata


def _is_checkpoint(source):
    """Whether `source` is a pretrained checkpoint to import (a hub id, or a Hugging Face layout directory)."""
    from keras_transformer.importers import HUB_PREFIX

    source = os.fspath(source)
    return source.startswith(HUB_PREFIX) or (os.path.isfile(os.path.join(source, "config.json"))
                                             and not os.path.exists(os.path.join(source, TASK_FILE)))


def _imported_run(source):
    """The run directory of an imported checkpoint, imported on first use into the cache."""
    import hashlib

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
