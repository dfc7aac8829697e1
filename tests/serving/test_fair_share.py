"""The engine and the batcher take turns on the cores in proportion to the requests each holds."""

import threading
import time

from keras_transformer.serving.fair_share import FairShare


def test_two_workers_share_the_cores_by_the_requests_they_hold():
    share, turns, stop = FairShare(half_life=60.0), {"engine": 0, "batch": 0}, threading.Event()
    inside = []

    def worker(name, requests):
        while not stop.is_set():
            with share.turn(name, requests=requests):
                inside.append(name)
                assert len(inside) == 1, inside  # one computes at a time
                time.sleep(0.005)
                turns[name] += 1
                inside.pop()

    threads = [threading.Thread(target=worker, args=(name, requests)) for name, requests in
               (("engine", 8), ("batch", 1))]
    for thread in threads:
        thread.start()
    time.sleep(1.5)
    stop.set()
    for thread in threads:
        thread.join(10)
    used = share.used()
    assert 4 < used["engine"] / used["batch"] < 16, (used, turns)  # about 8 to 1, as the requests held


def test_a_worker_alone_never_waits():
    share = FairShare()
    with share.turn("batch", requests=1):
        time.sleep(0.05)
    for _ in range(100):  # the batcher is idle: the engine takes every turn at once, whatever it used
        with share.turn("engine", requests=1):
            time.sleep(0.001)
    assert set(share.used()) == {"batch", "engine"} and share.used()["engine"] > share.used()["batch"]
