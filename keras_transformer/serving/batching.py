"""Server-side batching: concurrent requests wait in one bounded queue and run together, as TF Serving batches.

A batch closes when it holds `max_batch_size` sentences, or `batch_timeout` seconds after its first request
arrived (TF Serving's `max_batch_size` and `batch_timeout_micros`). One worker thread runs one batch at a time
(`num_batch_threads: 1`: a batch's matrix products already use every core). Only requests with the same batch key
(signature and options) share a batch. A batch that fails on input (`ValueError`, what a translator raises for a
request it refuses) is run again request by request, so that one request's bad input fails that request alone; any
other failure (out of memory, an internal error) is no request's fault and fails the batch's requests at once. The
queue holds at most `max_queued` sentences: `submit` refuses more (`QueueFull`), so memory stays bounded under any
load. Beside a continuous-batching engine, batches run a few sentences per turn of a `FairShare`.
"""

import collections
import concurrent.futures
import threading
import time


class QueueFull(Exception):
    """The queue holds `max_queued` sentences already."""


class ShuttingDown(Exception):
    """The batcher takes no new work: it is finishing what it accepted."""


def check_admission(closing, held, count, max_queued, held_as="waiting"):
    """Raises `ShuttingDown` once closing, or `QueueFull` if `count` more sentences would make the `held` ones
    exceed `max_queued` (a request larger than the limit alone is still taken when nothing is held)."""
    if closing:
        raise ShuttingDown("the server is shutting down")
    if held and held + count > max_queued:
        raise QueueFull(f"{held} sentences are {held_as} (--max-queued {max_queued})")


class WorkerThread:
    """The thread a batcher's work runs on (its `_work`), and the condition its callers wake it with."""

    def _start_worker(self, name):
        self._cond = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def close(self, timeout=None):
        """Takes no more work, finishes every accepted request, and stops the worker (waits up to `timeout` s)."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join(timeout)


class _Job:
    __slots__ = ("key", "items", "future", "arrival")

    def __init__(self, key, items):
        self.key, self.items = key, items
        self.future = concurrent.futures.Future()
        self.arrival = time.monotonic()


class Batcher(WorkerThread):
    """Runs `run_batch(key, items) -> results` (one result per item) over batches of concurrently submitted work.

    Args:
        run_batch: the work; called in the batcher's one worker thread.
        max_batch_size: the most items in a batch (a single larger request runs alone, whole).
        batch_timeout: seconds a batch waits, after its first request, for more (0: run what is there).
        max_queued: the most items waiting; `submit` raises `QueueFull` beyond it.
        share: a `FairShare` whose turns this worker takes (beside a continuous-batching engine), `turn_items`
            items at a time, so that a large batch holds the cores for a bounded time; `None`: whole batches.

    `stats()` reports the batches run and their mean size.
    """

    def __init__(self, run_batch, max_batch_size=32, batch_timeout=0.005, max_queued=1024, share=None,
                 turn_items=4):
        if max_batch_size < 1 or max_queued < 1 or batch_timeout < 0:
            raise ValueError("max_batch_size and max_queued must be >= 1 and batch_timeout >= 0")
        self.run_batch, self.share, self.turn_items = run_batch, share, turn_items
        self.max_batch_size, self.batch_timeout, self.max_queued = max_batch_size, batch_timeout, max_queued
        self._queue = collections.deque()
        self._queued = 0
        self._batches = self._items = 0
        self._start_worker("keras-transformer-batcher")

    def submit(self, key, items):
        """Queues `items` (a list) under `key`; returns a `concurrent.futures.Future` of their results (a list).

        A future cancelled before its batch starts is dropped from it (a client that timed out costs nothing).
        """
        job = _Job(key, list(items))
        with self._cond:
            check_admission(self._closing, self._queued, len(job.items), self.max_queued)
            self._queue.append(job)
            self._queued += len(job.items)
            self._cond.notify()
        return job.future

    def stats(self):
        with self._cond:
            return {"batches": self._batches, "sentences": self._items, "queued": self._queued,
                    "mean_batch_size": self._items / self._batches if self._batches else 0.0}

    def _same_key_items(self, key):
        return sum(len(j.items) for j in self._queue if j.key == key)

    def _next_batch(self):
        """The jobs of the next batch (waits for work; `None` once closed and drained)."""
        with self._cond:
            while not self._queue:
                if self._closing:
                    return None
                self._cond.wait()
            first = self._queue[0]
            deadline = first.arrival + self.batch_timeout
            while not self._closing and self._same_key_items(first.key) < self.max_batch_size:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            jobs, size, rest = [], 0, collections.deque()
            for job in self._queue:
                if job.key == first.key and (not jobs or size + len(job.items) <= self.max_batch_size):
                    jobs.append(job)
                    size += len(job.items)
                else:
                    rest.append(job)
            self._queue = rest
            self._queued -= size
            return jobs

    def _work(self):
        while True:
            jobs = self._next_batch()
            if jobs is None:
                return
            jobs = [j for j in jobs if j.future.set_running_or_notify_cancel()]
            if not jobs:
                continue
            try:
                self._run(jobs)
            except BaseException as error:
                if len(jobs) == 1 or not isinstance(error, ValueError):  # the requests get the error; the worker
                    for job in jobs:                                       # goes on
                        job.future.set_exception(error)
                    continue
                for job in jobs:  # one request's bad input must not fail the others: each runs alone
                    try:
                        self._run([job])
                    except BaseException as alone:
                        job.future.set_exception(alone)

    def _run(self, jobs):
        items = [item for job in jobs for item in job.items]
        if self.share is None:
            results = self.run_batch(jobs[0].key, items)
        else:
            results = []
            for begin in range(0, len(items), self.turn_items):
                with self._cond:
                    holding = len({id(job) for job in self._queue}) + len(jobs)
                with self.share.turn("batch", requests=holding):
                    results.extend(self.run_batch(jobs[0].key, items[begin: begin + self.turn_items]))
        if len(results) != len(items):
            raise RuntimeError(f"the batch of {len(items)} gave {len(results)} results")
        with self._cond:
            self._batches += 1
            self._items += len(items)
        begin = 0
        for job in jobs:
            job.future.set_result(results[begin: begin + len(job.items)])
            begin += len(job.items)
