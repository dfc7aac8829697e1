"""An ensemble directory: several run directories decoded as one (`keras-transformer ensemble`).

    ensemble_dir/
      ensemble.json     {"format": "keras_transformer.ensemble", "members": [run directories, relative to here],
                         "combine": "log_prob" or "prob" (how the members' next-token distributions are combined:
                         `keras_transformer.models.EnsembleParts`; "log_prob" when absent)}
      decoding.json     the beam size and length penalty chosen for the ensemble (`keras-transformer tune`)

`translate`, `evaluate` and `tune` take an ensemble directory wherever they take a run directory; the members are
loaded from their own run directories (nothing is copied), and must share their tokenizers.
"""

import dataclasses
import json
import os

from keras_transformer.atomic import write_json
from keras_transformer.decoding.tuning import DecodingSettings
from keras_transformer.models.ensemble import COMBINES
from keras_transformer.models.ensemble import EnsembleParts
from keras_transformer.runs.layout import DECODING_FILE
from keras_transformer.runs.layout import ENSEMBLE_FILE
from keras_transformer.runs.run import Run
from keras_transformer.runs.run import RunFileError
from keras_transformer.runs.run import load_run
from keras_transformer.runs.run import read_decoding_settings

_FORMAT = "keras_transformer.ensemble"


@dataclasses.dataclass
class Ensemble:
    """The member runs of an ensemble directory, their shared tokenizers, the ensemble's own decoding choice and
    how it combines its members (`combine`: "log_prob" or "prob", see `EnsembleParts`)."""

    members: list
    directory: str | None = None
    decoding: DecodingSettings | None = None
    combine: str = "log_prob"

    @property
    def models(self):
        return [run.model for run in self.members]

    @property
    def parts(self):
        """The members as one decodable `EnsembleParts` (what `Translator` and the exporters take)."""
        return EnsembleParts(self.models, combine=self.combine)

    @property
    def source_tokenizer(self):
        return self.members[0].source_tokenizer

    @property
    def target_tokenizer(self):
        return self.members[0].target_tokenizer


def is_ensemble_directory(directory):
    return os.path.isfile(os.path.join(directory, ENSEMBLE_FILE))


def _same_tokenizer(a, b):
    return a.get_config() == b.get_config() and list(a.vocab) == list(b.vocab)


def check_members(runs):
    """Raises ValueError unless the runs can be decoded together (one source and one target tokenizer)."""
    if len(runs) < 2:
        raise ValueError(f"an ensemble needs at least 2 run directories; got {len(runs)}")
    first = runs[0]
    for run in runs[1:]:
        for side in ("source", "target"):
            if not _same_tokenizer(getattr(first, f"{side}_tokenizer"), getattr(run, f"{side}_tokenizer")):
                raise ValueError(f"{run.directory}: its {side} tokenizer differs from {first.directory}'s; the "
                                 "members of an ensemble must share their tokenizers (train them on the same corpus "
                                 "with the same vocabulary settings)")


def write_ensemble(directory, member_directories, overwrite=False, combine="log_prob"):
    """Checks the members (loading each run) and writes `directory/ensemble.json`; returns the `Ensemble`.

    `combine` is how decoding combines the members' next-token distributions: "log_prob" (the mean of their
    log-probabilities, Marian's rule and the default) or "prob" (the log of the mean of their probabilities,
    fairseq's).

    Raises:
        FileExistsError: `directory` already holds an ensemble (or a run) and `overwrite` is false.
        FileNotFoundError, RunFileError: a member is not a readable run directory (naming it).
        ValueError: fewer than 2 members, a member named twice, members whose tokenizers differ, or an unknown
            `combine`.
    """
    if combine not in COMBINES:
        raise ValueError(f"combine={combine!r}: expected one of {', '.join(COMBINES)}")
    target = os.path.join(directory, ENSEMBLE_FILE)
    if os.path.exists(target) and not overwrite:
        raise FileExistsError(f"{target}: exists; pass --overwrite to replace the ensemble")
    if os.path.exists(os.path.join(directory, "model.keras")):
        raise FileExistsError(f"{directory} is a run directory; write the ensemble to a directory of its own")
    real = [os.path.realpath(m) for m in member_directories]
    if len(set(real)) != len(real):
        raise ValueError("a run directory is named twice; an ensemble's members are different runs")
    runs = [load_run(m) for m in member_directories]
    check_members(runs)
    os.makedirs(directory, exist_ok=True)
    members = [os.path.relpath(m, os.path.realpath(directory)) for m in real]
    write_json(target, {"format": _FORMAT, "members": members, "combine": combine})
    if overwrite and os.path.exists(os.path.join(directory, DECODING_FILE)):
        os.remove(os.path.join(directory, DECODING_FILE))  # chosen for other members (or another combine)
    return Ensemble(runs, directory, None, combine)


def _read_spec(directory):
    """`(members, combine)` of `directory/ensemble.json`, checked; raises RunFileError when it is damaged."""
    path = os.path.join(directory, ENSEMBLE_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
        if spec.get("format") != _FORMAT or not all(isinstance(m, str) for m in spec["members"]):
            raise ValueError("not an ensemble description")
        combine = spec.get("combine", "log_prob")  # ensembles written before `combine` existed
        if combine not in COMBINES:
            raise ValueError(f"combine {combine!r} is not one of {', '.join(COMBINES)}")
        return spec["members"], combine
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError) as error:
        raise RunFileError(f"{path}: damaged or not written by keras-transformer ensemble ({error})") from None


def member_directories(directory):
    """The member run directories of an ensemble directory, in order, as paths (nothing is loaded).

    Raises:
        RunFileError: `ensemble.json` is damaged.
        FileNotFoundError: a member run directory is gone (naming it).
    """
    members, _ = _read_spec(directory)
    return _member_paths(directory, members)


def _member_paths(directory, members):
    """`members` (as written in ensemble.json, relative to `directory`) as paths; each must exist."""
    directories = []
    for member in members:
        member_dir = os.path.normpath(os.path.join(os.path.realpath(directory), member))
        if not os.path.isdir(member_dir):
            raise FileNotFoundError(f"{os.path.join(directory, ENSEMBLE_FILE)}: its member run directory "
                                    f"{member_dir} is missing")
        directories.append(member_dir)
    return directories


def load_ensemble(directory):
    """Loads an ensemble directory's member runs as an `Ensemble`.

    Raises:
        RunFileError: `ensemble.json` is damaged.
        FileNotFoundError: a member run directory is gone (naming it).
        ValueError: the members' tokenizers differ.
    """
    members, combine = _read_spec(directory)  # ensemble.json read once
    runs: list[Run] = [load_run(member_dir) for member_dir in _member_paths(directory, members)]
    check_members(runs)
    return Ensemble(runs, directory, read_decoding_settings(directory), combine)


def load_run_or_ensemble(directory):
    """A `Run` for a run directory, an `Ensemble` for an ensemble directory (both have the tokenizers and
    `decoding`; an `Ensemble` has `models` and `members`, a `Run` has `model`)."""
    return load_ensemble(directory) if is_ensemble_directory(directory) else load_run(directory)
