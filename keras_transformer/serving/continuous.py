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
import threading

import numpy as np

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
    __slots__ = ("texts", "pairs", "future", "tokens", "pending", "requests", "on_tokens", "backlog")

    def __init__(self, texts, future, on_tokens=None, pairs=None):
        self.texts, self.future, self.on_tokens = texts, future, on_tokens
        self.pairs = pairs  # a multilingual model's (source, target) codes per text
        self.tokens = [None] * len(texts)
        self.pending = 0  # sentences not yet decoded (in the backlog or the engine)
        self.requests = []
        self.backlog = collections.deque()  # (index, source row, first token): not yet handed to the engine


class ContinuousBatcher:
    """Runs `serving_default` requests on `engine` (a `SlotEngine` of `translator`), one worker thread.

    Args:
        translator: the `Translator` whose tokenizers read the texts and write the translations.
        engine: its `SlotEngine` (`engine_for`).
        max_queued: the most sentences accepted and not yet answered; `submit` raises `QueueFull` beyond it.
    """

    def __init__(self, translator, engine, max_queued=1024):
        self.translator, self.engine, self.max_queued = translator, engine, max_queued
        self.multilingual = bool(translator.languages)
        self._incoming = collections.deque()
        self._backlog = collections.deque()  # jobs with sentences not yet in the engine, in turn
        self._accepted = 0  # sentences accepted and not yet answered
        self._cond = threading.Condition()
        self._closing = False
        self._steps = self._sentences = self._live_sum = 0
        self._thread = threading.Thread(target=self._work, name="keras-transformer-engine", daemon=True)
        self._thread.start()

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
            self._accepted += len(job.texts)
            self._incoming.append(job)
            self._cond.notify()
        return job

    def close(self, timeout=None):
        """Takes no more work, finishes every accepted request, and stops the worker (waits up to `timeout` s)."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join(timeout)

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
                finished = self.engine.step()
            except BaseException as error:  # not one request's input (those are checked before): fail them all
                log.exception("the decoding step failed; failing the %d sentences in the engine", len(jobs))
                self._fail_all(jobs, error)
                continue
            with self._cond:
                self._steps += 1
                self._live_sum += live
            answered = []
            for request in finished:
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
        """Hands the engine one waiting sentence of each job in turn, as many as it has free slots."""
        engine = self.engine
        free = engine.slots - engine.live - len(engine.waiting)
        while free > 0 and self._backlog:
            job = self._backlog.popleft()
            if job.future.done():  # answered with an error, or its client gave up: `_drop_abandoned` frees it
                continue
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
            job.requests.append(request)
            free -= 1
            if job.backlog:
                self._backlog.append(job)

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
        with self._cond:
            self._accepted -= len(job.texts)
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
