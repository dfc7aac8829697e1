"""Continuous batching in the server: `ContinuousBatcher` over a `SlotEngine` of the tiny run."""

import collections
import concurrent.futures
import json

import httpx
import pytest

from keras_transformer.serving import ServedModel
from keras_transformer.serving import ServerSettings
from keras_transformer.serving import start_server
from keras_transformer.serving import warm_up
from keras_transformer.serving.batching import QueueFull
from keras_transformer.serving.continuous import ContinuousBatcher
from tests.export.helpers import SENTENCES

WAIT = 60
KEY = ("serving_default", ())


@pytest.fixture
def served(served_model):
    """A `ServedModel` of its own (a fresh engine) over the tiny run's translator."""
    return ServedModel(served_model.translator, "tiny", batch_size=4, continuous=True)


def _texts():
    """Sentences of several lengths (two source buckets) and a blank one."""
    return SENTENCES + ["", SENTENCES[0] + " " + SENTENCES[1]]


def test_requests_joining_the_running_decode_get_the_translators_translations(served):
    texts = _texts()
    expected = served.translator.translate(texts)
    batcher = ContinuousBatcher(served.translator, served.engine, max_queued=64)
    try:
        futures = [batcher.submit(KEY, [(text,)]) for text in texts]  # more sentences than the 4 slots
        futures.append(batcher.submit(KEY, [(text,) for text in texts]))  # one request of several sentences
        answers = [future.result(WAIT) for future in futures]
    finally:
        batcher.close(WAIT)
    assert [a[0]["translation"] for a in answers[:-1]] == expected
    assert [row["translation"] for row in answers[-1]] == expected
    stats = batcher.stats()
    assert stats["sentences"] == 2 * len(texts) and stats["queued"] == 0 and stats["mean_live_slots"] > 1
    assert served.engine.idle


def test_requests_arriving_together_are_read_together_and_a_bad_one_fails_alone(served):
    texts = SENTENCES[:3]
    expected = served.translator.translate(texts)
    batcher = ContinuousBatcher(served.translator, served.engine, max_queued=64)
    try:
        with batcher._cond:  # the worker takes all of them at once, as a burst of clients arrives
            good = [batcher.submit(KEY, [(text,)]) for text in texts]
            bad = batcher.submit(KEY, [(12345,)])  # not text: its tokenizing fails
            several = batcher.submit(KEY, [(text,) for text in reversed(texts)])
        assert [future.result(WAIT)[0]["translation"] for future in good] == expected
        assert [row["translation"] for row in several.result(WAIT)] == expected[::-1]
        with pytest.raises(Exception):
            bad.result(WAIT)
    finally:
        batcher.close(WAIT)
    assert served.engine.idle and batcher.stats()["queued"] == 0


def test_free_slots_take_one_sentence_of_each_waiting_request_in_turn(served):
    """A request of one sentence arriving behind a large one is not queued behind all its sentences: it takes the
    next free slot in turn with it, and is answered while most of the large request still waits."""
    batcher = ContinuousBatcher(served.translator, served.engine, max_queued=256)
    answered = []
    try:
        with batcher._cond:  # both arrive before the worker looks: the large one first
            large = batcher.submit(KEY, [(SENTENCES[i % len(SENTENCES)],) for i in range(48)])
            small = batcher.submit(KEY, [(SENTENCES[0],)])
        small.add_done_callback(lambda future: answered.append(batcher.stats()["sentences"]))
        assert small.result(WAIT)[0]["translation"] == served.translator.translate([SENTENCES[0]])[0]
        assert len(large.result(WAIT)) == 48
    finally:
        batcher.close(WAIT)
    # Answered first (its own sentence the only one counted): in first-come order it would wait for all 48.
    assert answered == [1], answered


def test_while_several_requests_are_active_none_takes_more_than_its_share_of_the_slots(served, monkeypatch):
    """A large request cannot fill every slot that frees: each would add rows to every step and an encoding."""
    feed, fed = ContinuousBatcher._feed, []

    def recording_feed(self, jobs):
        before = collections.Counter(id(job) for job, _ in jobs.values())
        active = len(set(before) | {id(job) for job in self._backlog})
        feed(self, jobs)
        after = collections.Counter(id(job) for job, _ in jobs.values())
        fed.append((max(1, self.engine.slots // max(1, active)), active, before, after))

    monkeypatch.setattr(ContinuousBatcher, "_feed", recording_feed)
    batcher = ContinuousBatcher(served.translator, served.engine, max_queued=256)
    try:
        with batcher._cond:  # a large request and four of one sentence, together
            large = batcher.submit(KEY, [(SENTENCES[i % len(SENTENCES)],) for i in range(48)])
            small = [batcher.submit(KEY, [(SENTENCES[i],)]) for i in range(4)]
        assert all(len(future.result(WAIT)) == 1 for future in small) and len(large.result(WAIT)) == 48
    finally:
        batcher.close(WAIT)
    contended = [(share, before, after) for share, active, before, after in fed if active > 1]
    assert contended, "the requests were never active together"
    for share, before, after in contended:
        for job, count in after.items():
            assert count <= max(share, before[job]), (share, before, after)  # nothing fed past the share
    assert any(max(after.values()) == share for share, _, after in contended if after)


def test_a_request_that_could_not_end_within_the_timeout_is_refused_at_once_not_timed_out(served):
    batcher = ContinuousBatcher(served.translator, served.engine, max_queued=256, timeout_s=20)
    try:
        with batcher._cond:  # the worker waits while the test holds the lock
            open_ones = [batcher.submit(KEY, [(SENTENCES[i],)]) for i in range(3)]
            batcher._slot_seconds = 2.0  # as measured: a sentence holds a slot for 2 s
            # Beside 3 open requests a new one gets 4 // 4 = 1 of the engine's 4 slots: 6 sentences take about
            # 6 x 2 s = 12 s, more than half of the 20 s timeout; 5 sentences take about 10 s.
            assert served.engine.slots == 4
            with pytest.raises(QueueFull, match=r"6 sentences would take about 12 s .*--timeout-s"):
                batcher.submit(KEY, [(SENTENCES[i % len(SENTENCES)],) for i in range(6)])
            accepted = batcher.submit(KEY, [(SENTENCES[i % len(SENTENCES)],) for i in range(5)])
        assert len(accepted.result(WAIT)) == 5 and all(len(f.result(WAIT)) == 1 for f in open_ones)
    finally:
        batcher.close(WAIT)
    assert batcher.stats()["queued"] == 0 and batcher._open == 0 and not batcher._entered


def test_a_request_whose_client_gave_up_frees_its_slots_and_the_rest_are_answered(served):
    batcher = ContinuousBatcher(served.translator, served.engine, max_queued=64)
    try:
        abandoned = batcher.submit(KEY, [(text,) for text in SENTENCES * 3])
        assert abandoned.cancel()  # what the server's timeout does to the future
        kept = batcher.submit(KEY, [(SENTENCES[0],)])
        assert kept.result(WAIT) == [{"translation": served.translator.translate([SENTENCES[0]])[0]}]
    finally:
        batcher.close(WAIT)
    assert served.engine.idle and batcher.stats()["queued"] == 0
    assert all(request is None for request in served.engine.requests)


def test_the_queue_is_bounded(served):
    batcher = ContinuousBatcher(served.translator, served.engine, max_queued=3)
    try:
        first = batcher.submit(KEY, [(text,) for text in SENTENCES[:3]])
        with pytest.raises(QueueFull):
            batcher.submit(KEY, [(SENTENCES[0],)])
        assert len(first.result(WAIT)) == 3
        assert batcher.submit(KEY, [(SENTENCES[0],)]).result(WAIT)  # room again once answered
    finally:
        batcher.close(WAIT)


def test_after_the_warm_up_no_request_compiles(served):
    seconds = warm_up(served, ServerSettings(max_batch_size=4))
    compiled = set(served.engine.compiled_shapes)
    assert seconds > 0 and {kind for kind, *_ in compiled} == {"step", "insert"}
    with start_server(served, port=0, settings=ServerSettings(max_batch_size=4)) as server:
        url = f"{server.url}/v1/models/tiny:predict"
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda text: httpx.post(url, json={"instances": [text]}, timeout=WAIT),
                                    _texts()))
        streamed = []
        for text in SENTENCES[:2]:  # :stream decodes in the same engine
            with httpx.stream("POST", f"{server.url}/v1/models/tiny:stream", json={"text": text}, timeout=WAIT) as r:
                streamed.append([json.loads(line) for line in r.iter_lines() if line])
    assert [a.json()["predictions"][0] for a in answers] == served.translator.translate(_texts())
    for lines, text in zip(streamed, served.translator.translate(SENTENCES[:2])):
        assert lines[-1] == {"translation": text, "done": True}
        assert "".join(line["text"] for line in lines[:-1]) == text
    assert served.engine.compiled_shapes == compiled


def test_a_stream_decodes_in_the_engine_and_closing_it_frees_its_slot(served):
    expected = served.translator.translate([SENTENCES[1], ""])
    batcher = ContinuousBatcher(served.translator, served.engine, max_queued=64)
    try:
        assert "".join(batcher.stream(SENTENCES[1])) == expected[0]
        assert list(batcher.stream("")) == []
        left = batcher.stream(SENTENCES[1] + " " + SENTENCES[2])
        other = batcher.submit(KEY, [(SENTENCES[0],)])
        next(left, None)  # the client reads a piece (or none) and leaves
        left.close()
        assert other.result(WAIT)[0]["translation"] == served.translator.translate([SENTENCES[0]])[0]
    finally:
        batcher.close(WAIT)
    assert served.engine.idle and batcher.stats()["queued"] == 0


def test_static_batching_decodes_batch_at_a_time(served_model, tiny_run_dir):
    from keras_transformer.serving import load_served_model

    assert ServedModel(served_model.translator, "tiny").engine is not None  # continuous by default
    assert load_served_model(tiny_run_dir, settings=ServerSettings(batching="static")).engine is None
    with pytest.raises(ValueError, match="batching"):
        ServerSettings(batching="dynamic")


def test_beam_search_decodes_in_groups_of_slots_with_the_translators_translations(served_model):
    from keras_transformer.decoding import BeamSlotEngine

    beam = ServedModel(served_model.translator, "tiny", decoding={"beam_size": 2}, batch_size=2, continuous=True)
    assert isinstance(beam.engine, BeamSlotEngine) and beam.engine.beam == 2
    texts = _texts()
    expected = beam.translator.translate(texts, beam_size=2)
    batcher = ContinuousBatcher(beam.translator, beam.engine, max_queued=64)
    try:
        futures = [batcher.submit(KEY, [(text,)]) for text in texts]  # more sentences than the 2 slots
        answers = [future.result(WAIT)[0]["translation"] for future in futures]
        streamed = "".join(batcher.stream(texts[1]))  # the whole translation, when its search is done
    finally:
        batcher.close(WAIT)
    assert answers == expected and streamed == expected[1]
