"""One writer per run directory: a second `train` on the same `--output` stops with a clear line.

The lock is an advisory `flock` on `run_dir/.lock`, which also records who holds it. The operating system
releases it when its process ends, however it ends (a `kill -9` included), so a crashed run never leaves a stale
lock behind and the same command resumes at once.
"""

import fcntl
import json
import os
import socket
import time


class RunLockedError(ValueError):
    """Another process is writing the run directory."""


class RunLock:
    """Holds `run_dir/.lock` while a training writes `run_dir`.

    Example:

    >>> with RunLock("runs/de-en"):  # doctest: +SKIP
    ...     train(...)
    """

    def __init__(self, run_dir):
        self.run_dir = run_dir
        self.path = os.path.join(run_dir, ".lock")
        self._file = None

    def acquire(self):
        os.makedirs(self.run_dir, exist_ok=True)
        handle = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip()
            handle.close()
            try:
                info = json.loads(holder)
                who = f"process {info['pid']} on {info['host']} (since {info['since']})"
            except (ValueError, KeyError, TypeError):
                who = "another process"
            raise RunLockedError(f"{self.run_dir} is being written by {who}: wait for it to end, or use another "
                                 "--output") from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                 "since": time.strftime("%Y-%m-%d %H:%M:%S")}))
        handle.flush()
        self._file = handle
        return self

    def release(self):
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc_info):
        self.release()
