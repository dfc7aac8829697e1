"""The server's two decoding workers take turns on the cores, each in proportion to the requests it holds.

The continuous-batching engine (`serving_default`) and the batch-at-a-time `Batcher` (`n_best`,
`translate_with_prefix`, `score`, exported artifacts) each run in their own thread. Left alone they would compute at
the same time, and a few large batch-at-a-time requests would take half of every core from the engine's many small
ones. A `FairShare` lets one compute at a time; when both wait, the one that used less of the recent compute time
(seconds, decaying with a half-life of `half_life` s) per request it holds goes first. One that waits alone goes at
once: a server with one kind of work runs it unimpeded.

Example:

>>> share = FairShare()
>>> with share.turn("engine", requests=3):
...     pass
>>> sorted(share.used())
['engine']
"""

import contextlib
import math
import threading
import time


class FairShare:
    """Turns on the cores for named workers, shared by the requests each holds (see the module docstring).

    Args:
        half_life: seconds over which past compute time counts half as much.
    """

    def __init__(self, half_life=10.0):
        self.half_life = half_life
        self._cond = threading.Condition()
        self._busy = False
        self._used = {}  # name -> decayed compute seconds
        self._waiting = {}  # name -> requests it holds
        self._stamp = time.monotonic()

    def used(self):
        """The decayed compute seconds of each worker that has had a turn."""
        with self._cond:
            self._decay()
            return dict(self._used)

    @contextlib.contextmanager
    def turn(self, name, requests=1):
        """Waits for `name`'s turn (it holds `requests` requests), computes, then hands the cores on."""
        with self._cond:
            self._waiting[name] = max(1, int(requests))
            while self._busy or self._next() != name:
                self._cond.wait()
            del self._waiting[name]
            self._busy = True
        begin = time.monotonic()
        try:
            yield
        finally:
            with self._cond:
                self._decay()
                self._used[name] = self._used.get(name, 0.0) + time.monotonic() - begin
                self._busy = False
                self._cond.notify_all()

    def _next(self):
        self._decay()
        return min(self._waiting, key=lambda name: (self._used.get(name, 0.0) / self._waiting[name], name))

    def _decay(self):
        now = time.monotonic()
        factor = math.exp(-math.log(2) * (now - self._stamp) / self.half_life)
        self._stamp = now
        for name in self._used:
            self._used[name] *= factor
