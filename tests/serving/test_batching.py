"""`serving.batching.Batcher` with a recording `run_batch`: what runs together, what comes back where, and how it
stops.

Most tests first hand the worker a job that blocks on a gate (an event), queue more work behind it, then open the
gate: the queued work is then batched whatever the timing of the threads.
"""

import threading

import pytest

from keras_transformer.serving.batching import Batcher
from keras_transformer.serving.batching import QueueFull
from keras_transformer.serving.batching import ShuttingDown

WAIT = 10  # seconds any wait in these tests may take before it counts as a hang


class Recorder:
    """A `run_batch` that records each batch as `(key, items)` and returns `"key:item"` per item.

    While `gate` is not set, a batch holding the item "block" waits for it; an item "boom" raises `RuntimeError` (an
    internal failure), an item "refused" `ValueError` (what a translator raises for input it refuses).
    """

    def __init__(self):
        self.batches = []
        self.gate = threading.Event()
        self.blocked = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, key, items):
        with self.lock:
            self.batches.append((key, list(items)))
        if "block" in items:
            self.blocked.set()
            assert self.gate.wait(WAIT)
        if "boom" in items:
            raise RuntimeError("boom")
        if "refused" in items:
            raise ValueError("refused")
        return [f"{key}:{item}" for item in items]

    def items_run(self):
        with self.lock:
            return [item for _, items in self.batches for item in items]


@pytest.fixture
def make_batcher():
    """`make_batcher(**kwargs) -> (batcher, recorder)`; every batcher made is closed after the test."""
    made = []

    def make(**kwargs):
        recorder = Recorder()
        batcher = Batcher(recorder, **kwargs)
        made.append((batcher, recorder))
        return batcher, recorder

    yield make
    for batcher, recorder in made:
        recorder.gate.set()
        batcher.close(WAIT)


def block_worker(batcher, recorder, key="k"):
    """Submits the blocking job and waits until the worker runs it: what is submitted next stays queued."""
    future = batcher.submit(key, ["block"])
    assert recorder.blocked.wait(WAIT)
    return future


def submit_from_threads(batcher, jobs):
    """Submits each `(key, items)` of `jobs` from its own thread, all released at once; returns the futures."""
    barrier = threading.Barrier(len(jobs))
    futures = [None] * len(jobs)

    def submit(index):
        key, items = jobs[index]
        barrier.wait(WAIT)
        futures[index] = batcher.submit(key, items)

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    return futures


def test_concurrent_submits_run_as_one_batch_that_closes_when_full(make_batcher):
    # A batch timeout far beyond the test's length: the batch can only have run because it filled up.
    batcher, recorder = make_batcher(max_batch_size=4, batch_timeout=60)
    futures = submit_from_threads(batcher, [("k", [f"s{i}"]) for i in range(4)])
    results = [f.result(WAIT) for f in futures]
    assert results == [[f"k:s{i}"] for i in range(4)]
    assert len(recorder.batches) == 1
    key, items = recorder.batches[0]
    assert key == "k" and sorted(items) == ["s0", "s1", "s2", "s3"]


def test_a_lone_request_runs_once_the_batch_timeout_passes(make_batcher):
    batcher, recorder = make_batcher(max_batch_size=100, batch_timeout=0.05)
    assert batcher.submit("k", ["a"]).result(WAIT) == ["k:a"]
    assert recorder.batches == [("k", ["a"])]


def test_work_queued_while_the_worker_is_busy_runs_as_one_batch(make_batcher):
    batcher, recorder = make_batcher(max_batch_size=32, batch_timeout=0)
    block_worker(batcher, recorder)
    futures = [batcher.submit("k", [f"s{i}"]) for i in range(5)]
    recorder.gate.set()
    assert [f.result(WAIT) for f in futures] == [[f"k:s{i}"] for i in range(5)]
    assert recorder.batches == [("k", ["block"]), ("k", ["s0", "s1", "s2", "s3", "s4"])]
    stats = batcher.stats()
    assert stats["batches"] == 2 and stats["sentences"] == 6 and stats["queued"] == 0


def test_max_batch_size_caps_a_batch(make_batcher):
    batcher, recorder = make_batcher(max_batch_size=2, batch_timeout=0)
    block_worker(batcher, recorder)
    futures = [batcher.submit("k", [f"s{i}"]) for i in range(5)]
    recorder.gate.set()
    assert [f.result(WAIT) for f in futures] == [[f"k:s{i}"] for i in range(5)]
    sizes = [len(items) for _, items in recorder.batches[1:]]
    assert sizes == [2, 2, 1]
    assert recorder.items_run() == ["block", "s0", "s1", "s2", "s3", "s4"]


def test_a_request_larger_than_max_batch_size_runs_alone_and_whole(make_batcher):
    batcher, recorder = make_batcher(max_batch_size=2, batch_timeout=0)
    block_worker(batcher, recorder)
    small = batcher.submit("k", ["a"])
    large = batcher.submit("k", ["b", "c", "d"])
    recorder.gate.set()
    assert small.result(WAIT) == ["k:a"]
    assert large.result(WAIT) == ["k:b", "k:c", "k:d"]
    assert recorder.batches[1:] == [("k", ["a"]), ("k", ["b", "c", "d"])]


def test_different_keys_never_share_a_batch(make_batcher):
    batcher, recorder = make_batcher(max_batch_size=32, batch_timeout=0)
    block_worker(batcher, recorder, key="a")
    jobs = [("a", ["a1"]), ("b", ["b1"]), ("a", ["a2"]), ("c", ["c1"]), ("b", ["b2"])]
    futures = [batcher.submit(key, items) for key, items in jobs]
    recorder.gate.set()
    assert [f.result(WAIT) for f in futures] == [["a:a1"], ["b:b1"], ["a:a2"], ["c:c1"], ["b:b2"]]
    for key, items in recorder.batches:
        assert all(item.startswith(key) for item in items if item != "block")
    assert recorder.batches[1:] == [("a", ["a1", "a2"]), ("b", ["b1", "b2"]), ("c", ["c1"])]


def test_results_go_back_to_their_own_futures_in_order(make_batcher):
    batcher, recorder = make_batcher(max_batch_size=32, batch_timeout=0)
    block_worker(batcher, recorder)
    first = batcher.submit("k", ["x", "y"])
    second = batcher.submit("k", ["z"])
    third = batcher.submit("k", ["u", "v", "w"])
    recorder.gate.set()
    assert first.result(WAIT) == ["k:x", "k:y"]
    assert second.result(WAIT) == ["k:z"]
    assert third.result(WAIT) == ["k:u", "k:v", "k:w"]
    assert recorder.batches[1:] == [("k", ["x", "y", "z", "u", "v", "w"])]


def test_refused_input_fails_only_the_request_that_caused_it_and_the_worker_goes_on(make_batcher):
    batcher, recorder = make_batcher(max_batch_size=32, batch_timeout=0)
    block_worker(batcher, recorder)
    failing = batcher.submit("bad", ["refused"])
    sharing = batcher.submit("bad", ["other"])
    unaffected = batcher.submit("good", ["fine"])
    recorder.gate.set()
    with pytest.raises(ValueError, match="refused"):
        failing.result(WAIT)
    # The batch refused on input ran again request by request: the request that shared it gets its own answer.
    assert sharing.result(WAIT) == ["bad:other"]
    assert ("bad", ["refused", "other"]) in recorder.batches and ("bad", ["other"]) in recorder.batches
    assert unaffected.result(WAIT) == ["good:fine"]
    assert batcher.submit("bad", ["later"]).result(WAIT) == ["bad:later"]


def test_an_internal_failure_fails_the_batch_once_without_running_its_requests_again(make_batcher):
    batcher, recorder = make_batcher(max_batch_size=32, batch_timeout=0)
    block_worker(batcher, recorder)
    failing = batcher.submit("bad", ["boom"])
    sharing = batcher.submit("bad", ["other"])
    recorder.gate.set()
    for future in (failing, sharing):  # out of memory or an internal error is no request's fault
        with pytest.raises(RuntimeError, match="boom"):
            future.result(WAIT)
    assert [items for key, items in recorder.batches if key == "bad"] == [["boom", "other"]]
    assert batcher.submit("bad", ["later"]).result(WAIT) == ["bad:later"]  # the worker goes on


def test_a_wrong_number_of_results_is_an_error_for_the_batch(make_batcher):
    batcher, recorder = make_batcher(max_batch_size=32, batch_timeout=0)
    batcher.run_batch = lambda key, items: items[:-1]
    with pytest.raises(RuntimeError, match="2 gave 1 results"):
        batcher.submit("k", ["a", "b"]).result(WAIT)
    batcher.run_batch = recorder
    assert batcher.submit("k", ["c"]).result(WAIT) == ["k:c"]


def test_a_future_cancelled_before_its_batch_starts_is_dropped(make_batcher):
    batcher, recorder = make_batcher(max_batch_size=32, batch_timeout=0)
    running = block_worker(batcher, recorder)
    dropped = batcher.submit("k", ["dropped"])
    kept = batcher.submit("k", ["kept"])
    assert dropped.cancel()
    assert not running.cancel()  # already running: it finishes
    recorder.gate.set()
    assert kept.result(WAIT) == ["k:kept"]
    assert running.result(WAIT) == ["k:block"]
    assert dropped.cancelled()
    assert "dropped" not in recorder.items_run()


def test_submit_raises_queue_full_beyond_max_queued_sentences(make_batcher):
    batcher, recorder = make_batcher(max_batch_size=32, batch_timeout=0, max_queued=3)
    block_worker(batcher, recorder)  # running, so no longer queued
    first = batcher.submit("k", ["a", "b"])
    with pytest.raises(QueueFull):
        batcher.submit("k", ["c", "d"])
    assert batcher.stats()["queued"] == 2
    last = batcher.submit("k", ["c"])
    with pytest.raises(QueueFull):
        batcher.submit("other", ["d"])
    recorder.gate.set()
    assert first.result(WAIT) == ["k:a", "k:b"]
    assert last.result(WAIT) == ["k:c"]
    assert "d" not in recorder.items_run()
    assert batcher.submit("k", ["e", "f", "g"]).result(WAIT) == ["k:e", "k:f", "k:g"]


def test_close_finishes_queued_work_then_refuses_new_work(make_batcher):
    batcher, recorder = make_batcher(max_batch_size=32, batch_timeout=0)
    running = block_worker(batcher, recorder)
    queued = [batcher.submit("k", ["a"]), batcher.submit("other", ["b"])]
    batcher.close(timeout=0)  # stops taking work; the worker is still blocked
    with pytest.raises(ShuttingDown):
        batcher.submit("k", ["refused"])
    recorder.gate.set()
    batcher.close(WAIT)
    assert running.result(0) == ["k:block"]
    assert [f.result(0) for f in queued] == [["k:a"], ["other:b"]]
    assert "refused" not in recorder.items_run()
    with pytest.raises(ShuttingDown):
        batcher.submit("k", ["later"])


def test_close_of_an_idle_batcher_returns(make_batcher):
    batcher, _ = make_batcher()
    closer = threading.Thread(target=batcher.close)
    closer.start()
    closer.join(WAIT)
    assert not closer.is_alive()


@pytest.mark.parametrize("kwargs", [{"max_batch_size": 0}, {"max_queued": 0}, {"batch_timeout": -1}])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        Batcher(lambda key, items: items, **kwargs)
