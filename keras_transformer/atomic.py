"""Atomic writes: every artifact is written beside its destination under a temporary name, then renamed into place.

A process killed at any moment (`kill -9`, or a power loss) leaves either the old file or the new one at the
destination, never a half-written one: what was written (every file of a directory) is flushed to disk before the
rename, and the directory holding it after. Temporaries are hidden names in the same directory (a rename within one
file system is atomic): `.tmp-<pid>-<host>-<random>.<name>` while written, and `.old-...` for the moment a
directory being replaced is swapped out; the host and random parts keep processes of other hosts or containers
sharing a volume (where process ids repeat) from ever picking the same name. `clean_temporaries` removes what a
killed process of this host left (another host's, once a day old) and puts back a directory that was swapped out
but not yet replaced.

Example:

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> write_text(os.path.join(folder, "a.txt"), "hello")
>>> with atomic_path(os.path.join(folder, "b.txt")) as temporary:
...     with open(temporary, "w") as f:
...         _ = f.write("written elsewhere, then renamed")
>>> sorted(os.listdir(folder))
['a.txt', 'b.txt']
"""

import contextlib
import json
import os
import secrets
import shutil
import socket
import time

_TMP, _OLD = ".tmp-", ".old-"
STALE_S = 24 * 3600  # another host's temporaries older than this are removed


def _host():
    return "".join(c for c in socket.gethostname() if c.isalnum())[:24] or "host"


def _hidden(path, prefix):
    parent, name = os.path.split(os.path.abspath(path))
    # The original name stays at the end, so suffix-sensitive writers (`model.save(".../x.keras")`) accept it.
    return os.path.join(parent, f"{prefix}{os.getpid()}-{_host()}-{secrets.token_hex(4)}.{name}")


def _fsync(path, directory=False):
    try:
        descriptor = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    except OSError:  # a file system or platform that cannot open it for syncing
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def sync_tree(path):
    """Flushes `path` to disk: a file, or a directory with every file and directory under it."""
    if os.path.isdir(path) and not os.path.islink(path):
        for folder, _, names in os.walk(path, topdown=False):  # what a directory lists is on disk before it
            for name in names:
                if not os.path.islink(os.path.join(folder, name)):
                    _fsync(os.path.join(folder, name))
            _fsync(folder, directory=True)
    elif os.path.isfile(path):
        _fsync(path)


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.remove(path)


def remove_atomically(path):
    """Removes a file or a directory tree at once: renamed to a temporary name first (what a process killed
    meanwhile leaves, `clean_temporaries` removes), so `path` is there whole or gone, never half removed."""
    if not os.path.lexists(path):
        return
    hidden = _hidden(path, _TMP)
    os.rename(path, hidden)
    _fsync(os.path.dirname(hidden), directory=True)
    _remove(hidden)


@contextlib.contextmanager
def atomic_path(path):
    """Yields a temporary path beside `path` to write (a file or a directory); renames it onto `path` on success.

    On an exception the temporary is removed and `path` is left as it was. A directory that already exists at
    `path` is swapped out, the new one renamed in, then the old one removed.
    """
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    temporary = _hidden(path, _TMP)
    _remove(temporary)
    try:
        yield temporary
        if not os.path.lexists(temporary):
            raise FileNotFoundError(f"{temporary}: nothing was written for {path}")
        sync_tree(temporary)  # the new content is on disk before the rename makes it the destination
        _replace(temporary, path)
        _fsync(parent, directory=True)  # and the rename itself
    except BaseException:
        _remove(temporary)
        raise


def _replace(temporary, path):
    if os.path.isdir(path) and not os.path.islink(path):
        old = _hidden(path, _OLD)
        _remove(old)
        os.rename(path, old)
        os.rename(temporary, path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(temporary, path)


def write_text(path, text):
    """Writes `text` (UTF-8) to `path` atomically, flushed to disk before the rename."""
    with atomic_path(path) as temporary:
        with open(temporary, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())


def write_json(path, value, indent=2):
    """Writes `value` as JSON to `path` atomically."""
    write_text(path, json.dumps(value, indent=indent, ensure_ascii=False) + "\n")


def _owner_alive(name, prefix, directory):
    pid_text, _, rest = name[len(prefix):].split(".", 1)[0].partition("-")
    host = rest.rsplit("-", 1)[0] if rest else _host()
    if host != _host():  # another host's (or container's): its process cannot be asked; kept while it is recent
        try:
            return time.time() - os.lstat(os.path.join(directory, name)).st_mtime < STALE_S
        except OSError:
            return False
    if not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_temporaries(directory):
    """Removes the temporaries that dead processes left in `directory`; restores a swapped-out directory.

    Returns:
        The names removed or restored (for a message).
    """
    if not os.path.isdir(directory):
        return []
    cleaned = []
    for name in sorted(os.listdir(directory)):
        for prefix in (_TMP, _OLD):
            if name.startswith(prefix) and not _owner_alive(name, prefix, directory):
                path = os.path.join(directory, name)
                original = os.path.join(directory, name[len(prefix):].split(".", 1)[1]) if "." in name else None
                if prefix == _OLD and original and not os.path.lexists(original):
                    os.rename(path, original)  # killed between the two renames of a directory swap
                else:
                    _remove(path)
                cleaned.append(name)
    return cleaned
