"""Continuous batching for the server: `serving_default` requests decode in a `SlotEngine`'s slots.

A request's sentences join the running decode at the engine's next step, instead of waiting for the batch ahead of
them to finish; a sentence that ends frees its slot at once, and the next waiting sentence takes it. One worker
thread runs the engine (`ContinuousBatcher`), with the same contract as `Batcher`: `submit(key, items)` returns a
future of one result per item, the queue is bounded (`QueueFull`), `close()` finishes what was accepted. A request
whose client gave up (its future cancelled: the server's timeout) leaves its slots at the next step. Free slots are
filled fairly: one sentence from each waiting request in turn, so that a request of one sentence never waits behind
all the sentences of a large one. `stream(text)`
decodes a `:stream` request in the same slots, its pieces yielded as the engine decides its tokens.

`engine_for(translator, decoding, slots)` makes the engine where it applies: one model (a run, a preset or an
imported checkpoint) decoding greedily, by sampling (`SlotEngine`) or by beam search (`BeamSlotEngine`, a sentence's
beams in one slot). Ensembles and exported artifacts keep batch-at-a-time decoding (`Batcher`).
"""

import collections
import concurrent.futures
import logging
import queue
import time

import numpy as np

from keras_transformer.serving.batching import QueueFull
from keras_transformer.serving.batching import WorkerThread
from keras_transformer.serving.batching import check_admission

log = logging.getLogger("keras_transformer.serving")

ENGINE_SIGNATURE = "serving_default"


def engine_for(translator, decoding=None, slots=32, steps_per_call=1):
    """`(engine, reason)`: a `SlotEngine` that decodes `translator`'s `serving_default` as `decoding` (`beam_size`,
    `length_penalty`, `max_length`) says, or `(None, why not)`."""
    from keras_transformer.decoding.beam_slot_engine import BeamSlotEngine
    from keras_transformer.decoding.samplers import BeamSampler
    from keras_transformer.decoding.slot_engine import SlotEngine
    from keras_transformer.decoding.translator import Translator
    from keras_transformer.models import EnsembleParts

    decoding = decoding or {}
    if not isinstance(translator, Translator):
        return None, f"{type(translator).__name__} decodes inside its own runtime"
    if isinstance(translator.parts, EnsembleParts):
        return None, "an ensemble decodes batch at a time"
    sampler = translator.decoding_sampler(decoding.get("beam_size"), decoding.get("length_penalty"))
    max_length = decoding.get("max_length") or translator.max_length
    target = translator.target_tokenizer
    kind = BeamSlotEngine if isinstance(sampler, BeamSampler) else SlotEngine  # beam search: a group of rows a slot
    engine = kind(translator.model, max_length, target.start_id, target.end_id, slots=slots, sampler=sampler,
                  steps_per_call=steps_per_call, fixed_weights=True)
    return engine, None


class _Job:
    __slots__ = ("texts", "pairs", "future", "tokens", "pending", "requests", "on_tokens", "backlog", "arrival")

    def __init__(self, texts, future, on_tokens=None, pairs=None):
        self.texts, self.future, self.on_tokens = texts, future, on_tokens
        self.arrival = time.monotonic()
        self.pairs = pairs  # a multilingual model's (source, target) codes per text
        self.tokens = [None] * len(texts)
        self.pending = 0  # sentences not yet decoded (in the backlog or the engine)
        self.requests = []
        self.backlog = collections.deque()  # (index, source row, first token): not yet handed to the engine


class ContinuousBatcher(WorkerThread):
    """Runs `serving_default` requests on `engine` (a `SlotEngine` of `translator`), one worker thread.

    Args:
        translator: the `Translator` whose tokenizers read the texts and write the translations.
        engine: its `SlotEngine` (`engine_for`).
        max_queued: the most sentences accepted and not yet answered; `submit` raises `QueueFull` beyond it.
        share: a `FairShare` whose turns the engine's steps take (beside a `Batcher`); `None`: no turns.
        timeout_s: the server's timeout. A request whose sentences would take more than half of it at the share of
            slots it would get (from the measured seconds a sentence holds a slot) is refused at once (`QueueFull`)
            rather than answered 504 later, and one accepted may exceed its share by what it needs to end in time;
            `None`: not estimated.
    """

    def __init__(self, translator, engine, max_queued=1024, share=None, timeout_s=None):
        self.translator, self.engine, self.max_queued, self.share = translator, engine, max_queued, share
        self.timeout_s = timeout_s
        self._slot_seconds = None  # the mean seconds a sentence holds a slot (moving average)
        self._entered = {}  # SlotRequest -> when it was handed to the engine
        self._open = 0  # requests accepted and not yet answered
        self.multilingual = bool(translator.languages)
        self._incoming = collections.deque()
        self._backlog = collections.deque()  # jobs with sentences not yet in the engine, in turn
        self._accepted = 0  # sentences accepted and not yet answered
        self._steps = self._sentences = self._live_sum = 0
        self._start_worker("keras-transformer-engine")

    def submit(self, key, items):
        """Queues `items` (rows whose first field is the text; a multilingual model's rows end with their source and
        target language codes, checked) of `key` (`serving_default` only); returns a `concurrent.futures.Future` of
        one `{"translation": ...}` per item."""
        if key[0] != ENGINE_SIGNATURE:
            raise ValueError(f"the continuous batcher runs {ENGINE_SIGNATURE} only, not {key[0]}")
        pairs = [tuple(row[-2:]) for row in items] if self.multilingual else None
        return self._queue(_Job([row[0] for row in items], concurrent.futures.Future(), pairs=pairs)).future

    def stream(self, text, pair=None):
        """The translation of `text` in pieces as the engine decides its tokens, decoded beside the other requests
        (`:stream`). Raises `QueueFull` / `ShuttingDown` at once; returns a generator, whose closing (a client that
        left) frees the sentence's slot. `pair`: a multilingual model's (source, target) codes, checked."""
        from keras_transformer.decoding.streaming import text_pieces

        arrived = queue.SimpleQueue()
        end_id = self.engine.end_id
        job = self._queue(_Job([text], concurrent.futures.Future(), pairs=[pair] if self.multilingual else None,
                               on_tokens=lambda request, new: arrived.put([t for t in new if t != end_id])))
        job.future.add_done_callback(lambda future: arrived.put(None))

        def new_tokens():
            while (new := arrived.get()) is not None:
                yield new
            if not job.future.cancelled() and job.future.exception() is not None:
                raise job.future.exception()

        def detokenize(tokens):
            return [t.decode("utf-8", errors="replace") for t in self.translator.target_tokenizer.detokenize(
                tokens).numpy()]

        def pieces():
            try:
                yield from text_pieces(new_tokens(), detokenize)
            finally:
                job.future.cancel()  # no effect once answered; else the worker frees its slot

        return pieces()

    def _queue(self, job):
        with self._cond:
            check_admission(self._closing, self._accepted, len(job.texts), self.max_queued, "waiting or decoding")
            self._check_time(len(job.texts))
            self._accepted += len(job.texts)
            self._open += 1
            self._incoming.append(job)
            self._cond.notify()
        return job

    def _check_time(self, count):
        """`QueueFull` for `count` sentences that would take more than half of `timeout_s` at the share of slots
        a new request gets beside the open ones (all of them alone; at least one), once a sentence's time in a
        slot is measured."""
        if not (self.timeout_s and self._slot_seconds):
            return
        share = max(1, self.engine.slots // (self._open + 1))
        expected = -(-count // share) * self._slot_seconds
        if expected > self.timeout_s / 2:
            raise QueueFull(f"{count} sentences would take about {expected:.0f} s beside the {self._open} requests "
                            f"open ({share} at a time, {self._slot_seconds:.1f} s each), more than half of the "
                            f"{self.timeout_s:g} s timeout (--timeout-s): send fewer sentences per request")

    def stats(self):
        with self._cond:
            return {"steps": self._steps, "sentences": self._sentences, "queued": self._accepted,
                    "mean_live_slots": self._live_sum / self._steps if self._steps else 0.0}

    # The worker thread.

    def _work(self):
        jobs = {}  # SlotRequest -> (job, index)
        while True:
            with self._cond:
                while not self._incoming and self.engine.idle and not self._backlog:
                    if self._closing:
                        return
                    self._cond.wait()
                new = list(self._incoming)
                self._incoming.clear()
            self._start_all(new, jobs)
            self._drop_abandoned(jobs)
            self._feed(jobs)
            if self.engine.idle:
                continue
            live = self.engine.live + min(len(self.engine.waiting), self.engine.slots - self.engine.live)
            try:
                if self.share is None:
                    finished = self.engine.step()
                else:
                    holding = len({id(job) for job, _ in jobs.values()} | {id(job) for job in self._backlog})
                    with self.share.turn("engine", requests=holding):
                        finished = self.engine.step()
            except BaseException as error:  # not one request's input (those are checked before): fail them all
                log.exception("the decoding step failed; failing the %d sentences in the engine", len(jobs))
                self._fail_all(jobs, error)
                continue
            with self._cond:
                self._steps += 1
                self._live_sum += live
            answered = []
            now = time.monotonic()
            for request in finished:
                held = now - self._entered.pop(request, now)
                with self._cond:
                    self._slot_seconds = held if self._slot_seconds is None else 0.9 * self._slot_seconds + 0.1 * held
                job, index = jobs.pop(request)
                job.tokens[index] = request.tokens
                job.pending -= 1
                if job.pending == 0:
                    answered.append(job)
            self._answer(answered)

    def _sources(self, texts, pairs=None):
        """The engine's source rows of the non-blank `texts`, and each one's first token (a multilingual model's
        target language, from `pairs`; else `None`): `(indices, rows, first tokens)`."""
        from keras_transformer.data.words import is_blank
        from keras_transformer.decoding.languages import pack_with_languages
        from keras_transformer.decoding.translator import pad_source_rows
        from keras_transformer.decoding.translator import tokenize_rows

        source, target = self.translator.source_tokenizer, self.translator.target_tokenizer
        longest = self.translator.parts.max_length
        todo = [i for i, text in enumerate(texts) if not is_blank(text)]
        rows = tokenize_rows(source, [texts[i] for i in todo])
        if not rows:
            return todo, [], []
        if pairs is None:
            return todo, pad_source_rows(rows, source, longest), [None] * len(todo)
        codes = [source.language_id(pairs[i][0]) for i in todo]
        firsts = [target.language_id(pairs[i][1]) for i in todo]
        return todo, pack_with_languages(rows, codes, source.end_id, longest), firsts

    def _start_all(self, new, jobs):
        """Tokenizes the arriving requests in one call (each alone if that fails: one request's input fails it
        alone) and queues their sentences in the engine."""
        waiting = []
        for job in new:
            if job.future.cancelled():  # the client gave up while it waited
                self._done(job)
            else:
                waiting.append(job)
        if len(waiting) > 1:
            try:
                pairs = [pair for job in waiting for pair in job.pairs] if self.multilingual else None
                todo, sources, firsts = self._sources([text for job in waiting for text in job.texts], pairs)
            except Exception:  # noqa: BLE001 - some request's input: each is tokenized alone below
                pass
            else:
                owner = [(j, i) for j, job in enumerate(waiting) for i in range(len(job.texts))]
                tokenized = [([], [], []) for _ in waiting]  # per job: (indices, source rows, first tokens)
                for k, source, first in zip(todo, sources, firsts):
                    j, i = owner[k]
                    tokenized[j][0].append(i)
                    tokenized[j][1].append(source)
                    tokenized[j][2].append(first)
                for job, pair in zip(waiting, tokenized):
                    self._start(job, jobs, pair)
                return
        for job in waiting:
            self._start(job, jobs)

    def _start(self, job, jobs, tokenized=None):
        try:
            todo, sources, firsts = self._sources(job.texts, job.pairs) if tokenized is None else tokenized
        except Exception as error:  # this request's input: it alone fails
            return self._done(job, error=error)
        job.backlog.extend(zip(todo, sources, firsts))
        job.pending = len(job.backlog)
        if job.pending == 0:
            self._answer([job])
        else:
            self._backlog.append(job)

    def _feed(self, jobs):
        """Hands the engine one waiting sentence of each job in turn, as many as it has free slots; while several
        requests are active, none holds more than its share of the slots (a large request cannot fill every slot
        that frees, each adding rows to every step and an encoding to the next)."""
        engine = self.engine
        free = engine.slots - engine.live - len(engine.waiting)
        held = collections.Counter(id(job) for job, _ in jobs.values())
        active = len(set(held) | {id(job) for job in self._backlog})
        share = max(1, engine.slots // max(1, active))
        skipped = 0  # jobs passed over in a row (at their share): a whole round of them ends the feeding
        while free > 0 and self._backlog and skipped < len(self._backlog):
            job = self._backlog.popleft()
            if job.future.done():  # answered with an error, or its client gave up: `_drop_abandoned` frees it
                continue
            if held[id(job)] >= max(share, self._slots_needed(job, held[id(job)])):
                self._backlog.append(job)
                skipped += 1
                continue
            skipped = 0
            i, source, first = job.backlog.popleft()
            try:
                request = engine.submit(source, on_tokens=job.on_tokens, first_token=first)
            except Exception as error:  # this request's input: it alone fails
                for request in job.requests:
                    engine.cancel(request)
                    jobs.pop(request, None)
                self._done(job, error=error)
                continue
            jobs[request] = (job, i)
            self._entered[request] = time.monotonic()
            job.requests.append(request)
            held[id(job)] += 1
            free -= 1
            if job.backlog:
                self._backlog.append(job)

    def _slots_needed(self, job, held):
        """The slots `job` needs to end within most of `timeout_s` (a request accepted while the server was quiet
        may hold more than its share once others arrive, as much as it needs and no more)."""
        if not (self.timeout_s and self._slot_seconds):
            return 0
        left = job.arrival + 0.8 * self.timeout_s - time.monotonic()
        if left <= self._slot_seconds:
            return self.engine.slots
        return -(-(len(job.backlog) + held) * self._slot_seconds // left)

    def _answer(self, answered):
        """Answers the jobs whose sentences all ended, detokenizing them together in one call."""
        texts = [[""] * len(job.texts) for job in answered]
        rows = [(a, i) for a, job in enumerate(answered) for i, tokens in enumerate(job.tokens) if tokens is not None]
        if rows:
            padded = np.zeros((len(rows), max(1, max(len(answered[a].tokens[i]) for a, i in rows))), "int32")
            for row, (a, i) in enumerate(rows):
                padded[row, : len(answered[a].tokens[i])] = answered[a].tokens[i]
            for (a, i), text in zip(rows, self.translator.target_tokenizer.detokenize(padded).numpy()):
                texts[a][i] = text.decode("utf-8", errors="replace")
        for job, job_texts in zip(answered, texts):
            self._done(job, results=[{"translation": text} for text in job_texts])

    def _done(self, job, results=None, error=None):
        for request in job.requests:
            self._entered.pop(request, None)
        with self._cond:
            self._accepted -= len(job.texts)
            self._open -= 1
            if results is not None:
                self._sentences += len(job.texts)
        try:
            if error is not None:
                job.future.set_exception(error)
            elif results is not None:
                job.future.set_result(results)
        except concurrent.futures.InvalidStateError:  # the client gave up meanwhile
            pass

    def _drop_abandoned(self, jobs):
        """Frees the slots of requests whose client gave up (their future was cancelled)."""
        abandoned = {id(job): job for job, _ in jobs.values() if job.future.cancelled()}
        for job in self._backlog:
            if job.future.cancelled():
                abandoned[id(job)] = job
        self._backlog = collections.deque(job for job in self._backlog if id(job) not in abandoned)
        for job in abandoned.values():
            for request in job.requests:
                self.engine.cancel(request)
                jobs.pop(request, None)
            self._done(job)

    def _fail_all(self, jobs, error):
        for job in {id(job): job for job, _ in jobs.values()}.values():
            for request in job.requests:
                self.engine.cancel(request)
            self._done(job, error=RuntimeError(f"internal error while decoding ({type(error).__name__}; see the "
                                               "server log)"))
        jobs.clear()
