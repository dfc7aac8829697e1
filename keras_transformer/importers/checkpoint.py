"""Reading another toolkit's checkpoint as data: where it is (a local directory or the Hugging Face Hub), its JSON
files and its tensors.

Tensors are read as tensors, never as code: safetensors files with `safetensors` itself, and a PyTorch
`pytorch_model.bin` only with `torch.load(weights_only=True)`, which refuses any pickle that would build something
other than tensors and plain containers. A file that cannot be read is named in a one-line `CheckpointError`.
"""

import collections.abc
import contextlib
import json
import os
import pickle

import numpy as np

from keras_transformer.data.marian_vocabulary import read_json
from keras_transformer.extras import install_hint

HUB_PREFIX = "hf://"
SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PYTORCH_FILE = "pytorch_model.bin"


class CheckpointError(ValueError):
    """A checkpoint that cannot be imported; the message names the file (or hub id) and what was expected."""


class CheckpointWarning(UserWarning):
    """A checkpoint imported with something left out (tensors the model has no place for), named in the message."""


def resolve_source(source, files, verbose=1):
    """The local directory of `source`: a directory as it is, or `hf://OWNER/NAME` downloaded from the Hub.

    Args:
        source: a local directory, or `hf://OWNER/NAME[@REVISION]`.
        files: glob patterns of the files to download from the Hub (the rest of the repository is not fetched).
        verbose: 0 quiet, 1 the Hub's progress bars.

    Raises:
        CheckpointError: a local path that is not a directory, a malformed hub id, or a hub that cannot be reached.
    """
    source = os.fspath(source)
    if not source.startswith(HUB_PREFIX):
        if not os.path.isdir(source):
            raise CheckpointError(f"{source}: not a directory; expected a checkpoint directory in the Hugging Face "
                                  f"layout or {HUB_PREFIX}OWNER/NAME")
        return source
    repo, _, revision = source[len(HUB_PREFIX):].partition("@")
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise CheckpointError(f"{source}: expected {HUB_PREFIX}OWNER/NAME (for example "
                              f"{HUB_PREFIX}Helsinki-NLP/opus-mt-de-en)")
    try:
        import huggingface_hub
    except ImportError:
        raise CheckpointError(f"{source}: downloading from the Hub needs huggingface_hub: {install_hint('hf')}") \
            from None
    try:
        if not verbose:
            huggingface_hub.utils.disable_progress_bars()
        # The pickle only where the repository has no safetensors weights: never both, and never a pickle if not needed.
        first = [pattern for pattern in files if pattern != PYTORCH_FILE]
        directory = huggingface_hub.snapshot_download(repo, revision=revision or None, allow_patterns=first)
        if PYTORCH_FILE in files and not any(os.path.isfile(os.path.join(directory, name))
                                             for name in (SAFETENSORS_FILE, SAFETENSORS_INDEX)):
            directory = huggingface_hub.snapshot_download(repo, revision=hub_revision(directory) or revision or None,
                                                          allow_patterns=[PYTORCH_FILE])
        return directory
    except Exception as error:  # noqa: BLE001 - offline, DNS, HTTP and missing-repository errors alike
        if type(error).__name__ in ("RepositoryNotFoundError", "RevisionNotFoundError", "GatedRepoError"):
            raise CheckpointError(f"{source}: the Hub has no such model or revision ({type(error).__name__})") from None
        reason = str(error).strip().splitlines()[0][:160] if str(error).strip() else type(error).__name__
        raise CheckpointError(f"cannot reach the Hugging Face Hub for {source} ({reason}); pass a local directory "
                              "that holds the checkpoint's files instead") from None


def hub_revision(directory):
    """The commit a directory downloaded from the Hub holds (its snapshot's name, `.../snapshots/COMMIT`), else
    `None`: what `imported.json` records, whatever branch or tag was asked for."""
    parent, name = os.path.split(os.path.normpath(os.fspath(directory)))
    if os.path.basename(parent) == "snapshots" and len(name) == 40 and all(c in "0123456789abcdef" for c in name):
        return name
    return None


def read_json_object(path, what):
    """A JSON object from `path`; `CheckpointError` naming the file (and the line) when it is missing, not JSON,
    or not an object."""
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: missing; expected {what}")
    try:
        value = read_json(path, what)
    except ValueError as error:
        raise CheckpointError(str(error)) from None
    if not isinstance(value, dict):
        raise CheckpointError(f"{path}: expected a JSON object ({what}), found {type(value).__name__}")
    return value


def read_tensors(directory):
    """Every tensor of the checkpoint in `directory`, as float32 NumPy arrays by name: a mapping.

    `model.safetensors` (or the shards a `model.safetensors.index.json` lists) is read one tensor at a time, when the
    mapping is asked for it (`SafetensorsTensors`): an import holds the model and one checkpoint tensor, not a second
    copy of every weight. `pytorch_model.bin` is read whole, with `torch.load(weights_only=True)`.

    Raises:
        CheckpointError: no weights file, a damaged or truncated one, or a pickle that is more than tensors.
    """
    index = os.path.join(directory, SAFETENSORS_INDEX)
    single = os.path.join(directory, SAFETENSORS_FILE)
    if os.path.isfile(single):
        return SafetensorsTensors([single])
    if os.path.isfile(index):
        shards = sorted(set(read_json_object(index, "a safetensors index").get("weight_map", {}).values()))
        if not shards:
            raise CheckpointError(f"{index}: its \"weight_map\" lists no files")
        for shard in shards:
            if not isinstance(shard, str) or shard in ("", ".", "..") or os.path.basename(shard) != shard or \
                    "\\" in shard:
                raise CheckpointError(f"{index}: names the shard {shard!r}; a shard must be a file name inside the "
                                      "checkpoint directory (no directories, no '..')")
        return SafetensorsTensors([os.path.join(directory, shard) for shard in shards])
    pickled = os.path.join(directory, PYTORCH_FILE)
    if os.path.isfile(pickled):
        return _read_pytorch(pickled)
    raise CheckpointError(f"{directory}: no weights; expected {SAFETENSORS_FILE} (or {SAFETENSORS_INDEX} with its "
                          f"shards) or {PYTORCH_FILE}")


class SafetensorsTensors(collections.abc.Mapping):
    """The tensors of safetensors files by name, each read (as a float32 NumPy array) when asked for.

    The files' headers are checked at once; a file that is missing, damaged or truncated is named in a
    `CheckpointError`, then or when a tensor of it is read.
    """

    def __init__(self, paths):
        try:
            from safetensors import safe_open
        except ImportError:
            raise CheckpointError(f"{paths[0]}: reading safetensors needs the safetensors package: "
                                  f"{install_hint('hf')}") from None
        self._open, self._where = safe_open, {}
        for path in paths:
            if not os.path.isfile(path):
                raise CheckpointError(f"{path}: missing (listed in {SAFETENSORS_INDEX})")
            with _damaged(path), safe_open(path, framework="numpy") as handle:
                names = list(handle.keys())
                _check_extent(path, os.path.getsize(path))
            self._where.update((name, path) for name in names)

    def __getitem__(self, name):
        path = self._where[name]
        # Opened for each tensor: the file's pages leave this process with its mapping, so an import's resident
        # memory holds the model and one tensor, not the whole file besides.
        with _damaged(path), self._open(path, framework="numpy") as f:
            return np.asarray(f.get_tensor(name), dtype=np.float32)

    def __iter__(self):
        return iter(self._where)

    def __len__(self):
        return len(self._where)


@contextlib.contextmanager
def _damaged(path):
    """Turns what safetensors raises for a damaged file into a one-line `CheckpointError` naming `path`."""
    try:
        yield
    except CheckpointError:
        raise
    except Exception as error:  # noqa: BLE001 - safetensors raises its own error types for damaged files
        text = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
        raise CheckpointError(f"{path}: cannot be read as safetensors ({text}); the file is damaged or truncated "
                              "(download it again)") from None


def _check_extent(path, size):
    """Refuses a file shorter than its header says (a truncated download): its last tensor would be cut."""
    with open(path, "rb") as f:
        header_size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(header_size))
    ends = [entry["data_offsets"][1] for name, entry in header.items() if name != "__metadata__"]
    if 8 + header_size + max(ends, default=0) > size:
        raise ValueError(f"{size:,} bytes, where its header describes {8 + header_size + max(ends):,}")


def _read_pytorch(path):
    try:
        import torch
    except ImportError:
        raise CheckpointError(f"{path}: a PyTorch pickle, which is read only with torch.load(weights_only=True); "
                              f"{install_hint('torch')}, or give the checkpoint as model.safetensors") from None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        first = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        raise CheckpointError(f"{path}: refused: it holds more than tensors, and a checkpoint is data, never code "
                              f"(torch.load(weights_only=True): {first})") from None
    except Exception as error:  # noqa: BLE001 - zip and storage errors of a damaged file
        text = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
        raise CheckpointError(f"{path}: cannot be read as a PyTorch checkpoint ({text}); the file is damaged or "
                              "truncated (download it again)") from None
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{path}: expected a dictionary of tensors (a model's state_dict)")
    return {name: value.detach().to(torch.float32).numpy() for name, value in state.items()}
