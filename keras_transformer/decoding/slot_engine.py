"""Continuous batching: a fixed number of decoding slots that sentences enter and leave between steps.

The whole-loop decoders (`greedy_decode`, `beam_search`, `sample_decode`) take a batch, decode it until its longest
row ends, and only then take the next batch: a row that has ended still pays for every later step, and a sentence
that arrives while a batch runs waits for all of it. A `SlotEngine` keeps `slots` rows on the device instead, each
at its own position (the decoder step takes one position per row; docs/decoding.md draws the slots over time).

- `submit` queues a sentence (its source ids; optionally a forced target prefix, and the random numbers it samples
  with); `step` moves waiting sentences into free slots (`insert`: encode the new sources and write their
  cross-attention keys/values into those slots; one sentence in the step's own call) and then advances every slot
  by `steps_per_call` tokens in one compiled call; sentences that ended come back from `step`, their slots free.
- Shapes are few (the step on the first 1, 4, 16, ... or `slots` rows, the fewest holding every busy slot; sources
  padded to a width from `source_buckets`, each with its own cache length), so `warm_up()` compiles them all and
  nothing compiles afterwards. The caches are updated in place (`in_place`).

Greedy search and sampling (`GreedySampler`, `RandomSampler`, `TopKSampler`, `TopPSampler`) decode per slot, with
forced prefixes; a sentence gives the same tokens as the whole-loop decoder gives it, alone or in any batch
(sampling: with the same random numbers, `uniforms`). Beam search (and n-best lists) decode in a `BeamSlotEngine`,
where a sentence takes a group of slots, one per beam.
"""

import collections

import numpy as np
from keras import ops

from keras_transformer.decoding import arguments
from keras_transformer.decoding import loop_ops
from keras_transformer.decoding.in_place import compile_in_place
from keras_transformer.decoding.in_place import state_holder
from keras_transformer.decoding.in_place import store
from keras_transformer.decoding.sampling import sample_token
from keras_transformer.decoding.slot_request import checked_request
from keras_transformer.decoding.slot_request import slot_settings
from keras_transformer.models.ensemble import EnsembleParts

DEFAULT_SOURCE_BUCKETS = (16, 32, 64, 128, 256, 512, 1024)


class SlotEngine:
    """A fixed number of decoding slots that sentences enter and leave between steps (continuous batching).

    Args:
        model: a model from `build_transformer` (or loaded back from `.keras`), or its `TransformerParts`.
        max_length: Python int. Most tokens a sentence decodes (`end_id` included); the caches' length.
        start_id: Python int. The first decoder input.
        end_id: Python int. The id that ends a sentence.
        slots: Python int. Rows decoded together (the batch the step runs at).
        sampler: `"greedy"` (default), a `GreedySampler` (its `force_end`) or a sampling sampler (`RandomSampler`,
            `TopKSampler`, `TopPSampler`; each sentence samples with its own random numbers, see `submit`).
        steps_per_call: Python int. The most tokens each slot advances per compiled call; a call returns early,
            after the step in which a quarter of the busy slots (at least one) have ended. More: fewer calls (each
            costs a dispatch from Python); a sentence that arrives meanwhile waits for the call to return.
        source_buckets: ascending Python ints, the source widths the engine compiles for; a longer source is
            refused. Default 16, 32, 64, 128, ... up to the model's `max_length` (and it).
        fixed_weights: Python bool. `True` where the weights do not change while the engine runs (a server): what
            the steps share is computed once. Default `False`: again each time the engine resumes after going idle.

    Example:

    >>> import numpy as np
    >>> from keras_transformer import build_transformer
    >>> model = build_transformer(50, 50, num_layers=1, d_model=16, num_heads=2, d_ff=32)
    >>> engine = SlotEngine(model, max_length=8, start_id=1, end_id=2, slots=2)
    >>> outputs = engine.run([np.array([5, 6, 7]), np.array([8, 9]), np.array([10, 11, 12, 13])])
    >>> len(outputs), all(1 <= len(tokens) <= 8 for tokens in outputs)
    (3, True)
    """

    beam = 1  # decoder rows per sentence (`BeamSlotEngine`: its beams)

    def __init__(self, model, max_length, start_id, end_id, slots=32, sampler="greedy", steps_per_call=1,
                 source_buckets=None, fixed_weights=False):
        parts, max_length, start_id, end_id = arguments.check_decoding_args(model, max_length, start_id, end_id)
        if isinstance(parts, EnsembleParts):
            raise ValueError("SlotEngine decodes one model; ensembles decode with the whole-loop decoders.")
        self.parts = parts
        self.max_length, self.start_id, self.end_id = max_length, start_id, end_id
        self.slots = arguments.check_positive_int("slots", slots)
        self.steps_per_call = arguments.check_positive_int("steps_per_call", steps_per_call)
        self._configure(sampler)
        if source_buckets is None:
            limit = max(16, int(parts.max_length))
            source_buckets = [b for b in DEFAULT_SOURCE_BUCKETS if b < limit] + [limit]
        self.source_buckets = tuple(sorted({arguments.check_positive_int("source_buckets", b)
                                            for b in source_buckets}))
        self.insert_sizes = tuple(4 ** i for i in range(16) if 4 ** i <= self.slots)
        # The step runs on the first n slots only, n the smallest of these that holds every busy slot (free slots are
        # taken lowest first): a lone sentence steps one row, not `slots`. Powers of 4 and `slots`, each compiled per
        # width: a step runs on at most 4x the rows it needs, and there are few shapes to compile.
        self.step_sizes = tuple(sorted({*self.insert_sizes, self.slots}))
        self.waiting = collections.deque()
        self.requests = [None] * self.slots  # the request in each slot
        self.compiled_shapes = set()  # (kind, width[, size]) traced so far
        self._positions = np.zeros(self.slots, "int32")
        self._last = np.full(self.slots, start_id, "int32")
        self.fixed_weights = bool(fixed_weights)
        self._width = None  # the source width the cross-attention state now has
        self._self_caches = None
        self._cross_caches = None
        self._source_mask = None
        self._parked = {}  # width: (cross caches, source mask) of the widths not in use
        self._invariant = None
        self._steps = {}
        self._inserts = {}

    def _configure(self, sampler):
        self.filters, self.force_end, self.seed = slot_settings(sampler)

    def submit(self, source, prefix=None, uniforms=None, seed=None, on_tokens=None, first_token=None):
        """Queue one sentence; it enters a free slot at the next `step`. Returns its `SlotRequest`.

        Args:
            source: int source ids `[S]` (a trailing 0 padding is dropped), at most the largest source bucket.
            prefix: optional int `[P]`, `P < max_length`: the sentence's first output tokens, forced.
            uniforms: sampling only, float32 `[max_length]` in `(0, 1)`: the random number for each position (the
                row of `sample_decode`'s numbers that gives its tokens); default drawn from `seed`.
            seed: sampling only, Python int for the default `uniforms` (`None`: the sampler's seed if it has one,
                else a fresh seed).
            on_tokens: optional callable `(request, new_tokens)`, called after each step that gave it tokens.
            first_token: optional int id: the first output token, forced at no cost (beam search scores it 0, as
                transformers' `forced_bos_token_id`: a multilingual model's target language); not with `prefix`.
        """
        request = checked_request(source, prefix, uniforms, seed, on_tokens, self.max_length, self.source_buckets[-1],
                                  self.filters is not None, self.seed, first_token)
        self.waiting.append(request)
        return request

    def cancel(self, request):
        """Stop decoding `request`: out of the queue, or its slot freed for the next sentence."""
        if request.done or request.cancelled:
            return
        request.cancelled = True
        if request.slot is not None:
            self._end(request)
            request.done = False
        else:
            try:
                self.waiting.remove(request)
            except ValueError:
                pass

    @property
    def live(self):
        """How many slots hold a sentence."""
        return sum(r is not None for r in self.requests)

    @property
    def idle(self):
        """Whether no sentence is decoding or waiting."""
        return not self.waiting and not self.live

    def _new_state(self, width):
        """Zeroed cross-attention caches, source mask and self-attention caches for source bucket `width`."""
        parts, rows = self.parts, self.slots * self.beam
        shape = (rows, parts.num_heads, width, parts.head_dim)
        caches = parts.empty_self_attention_caches(rows, self.cache_length(width))
        return ([tuple(state_holder(ops.zeros(shape, parts.decoder_layers[0].compute_dtype)) for _ in "kv")
                 for _ in parts.decoder_layers], state_holder(ops.zeros((rows, width), "bool")),
                [tuple(map(state_holder, c)) for c in caches])

    def _refresh_weights(self):
        """Computes, from the weights as they are now, what every step would otherwise recompute (the transposed
        tied embedding): when decoding starts, and again each time the engine resumes after going idle (unless
        `fixed_weights`)."""
        self._invariant = self.parts.output_invariant()

    def cache_length(self, width):
        """The self-attention caches' length at source bucket `width`: `2 * width + 16` positions (the whole
        `max_length` at the largest bucket). A step attends over (and beam search reorders) the whole cache, so a
        short one is cheaper; a sentence that outgrows it moves every row to a larger bucket."""
        return self.max_length if width >= self.source_buckets[-1] else min(self.max_length, 2 * width + 16)

    def _resize(self, width):
        """Switch to the caches and source mask of source bucket `width` (kept per bucket, so that a compiled
        function never sees new state). What live rows hold is copied over, padded or cut (what fits: only padding
        and unwritten positions are cut)."""
        if self._invariant is None:
            self._refresh_weights()
        if width == self._width:
            return
        if self._width is not None:
            self._parked[self._width] = (self._cross_caches, self._source_mask, self._self_caches)
        old = (self._cross_caches, self._source_mask, self._self_caches)
        length = self.cache_length(width)
        self._cross_caches, self._source_mask, self._self_caches = self._parked.pop(width, None) or \
            self._new_state(width)
        if self.live and self._width is not None:
            def fit(x, axis, size):
                pad = [[0, 0]] * len(x.shape)
                pad[axis] = [0, max(0, size - x.shape[axis])]
                return ops.pad(x, pad) if size > x.shape[axis] else x[:, :, :size] if axis == 2 else x[:, :size]

            self._cross_caches = [(store(k, fit(ok, 2, width)), store(v, fit(ov, 2, width)))
                                  for (k, v), (ok, ov) in zip(self._cross_caches, old[0])]
            self._source_mask = store(self._source_mask, fit(old[1], 1, width))
            self._self_caches = [(store(k, fit(ok, 2, length)), store(v, fit(ov, 2, length)))
                                 for (k, v), (ok, ov) in zip(self._self_caches, old[2])]
        self._width = width

    def _needed_width(self, incoming=()):
        """The smallest source bucket that holds every live and `incoming` source, and whose caches hold the
        positions the live rows reach in the next call."""
        live = [(len(r.source), self._positions[r.slot]) for r in self.requests if r is not None]
        lengths = [n for n, _ in live] + [len(r.source) for r in incoming]
        if not lengths:
            return None
        reach = max([p for _, p in live], default=0) + self.steps_per_call
        return next(b for b in self.source_buckets if b >= max(lengths) and (
            self.cache_length(b) >= reach or b == self.source_buckets[-1]))

    # Compiled functions.

    def _write_sources(self, cross_caches, source_mask, sources, slot_ids):
        """Encode `sources` `[n, W]` and write their cross-attention keys/values and masks into the rows of slots
        `slot_ids` (each slot's `beam` rows)."""
        parts, beam = self.parts, self.beam
        encoded, mask = parts.encode(sources)
        new = parts.cross_attention_caches(encoded)
        where = ops.expand_dims(slot_ids, 1)
        if beam > 1:  # encoded once per sentence, written into each of its beams' rows
            where = ops.reshape(where * beam + ops.arange(beam, dtype="int32")[None], (-1, 1))
            new = [(ops.repeat(k, beam, axis=0), ops.repeat(v, beam, axis=0)) for k, v in new]
            mask = ops.repeat(mask, beam, axis=0)
        cross_caches = [(ops.scatter_update(k, where, ops.cast(nk, k.dtype)),
                         ops.scatter_update(v, where, ops.cast(nv, v.dtype)))
                        for (k, v), (nk, nv) in zip(cross_caches, new)]
        return cross_caches, ops.scatter_update(source_mask, where, mask)

    def _write_arrival(self, cross_caches, source_mask, sources, slot_ids):
        """Inside a step: write the one arriving sentence (`sources` `[1, W]`) into slot `slot_ids[0]`, or nothing
        where it is -1 (a conditional: one program for both, the encoder run only when a sentence arrives)."""
        return ops.cond(ops.greater_equal(slot_ids[0], 0),
                        lambda: self._write_sources(cross_caches, source_mask, sources, ops.maximum(slot_ids, 0)),
                        lambda: (cross_caches, source_mask))

    def _arrival(self, group):
        """A step's `(sources [1, W], slot_ids [1])` tensors: its one arriving sentence, or none (slot -1)."""
        group = group or (np.zeros((1, self._width), "int32"), np.full(1, -1, "int32"))
        return [ops.convert_to_tensor(g) for g in group]

    def _step_function(self):
        """One compiled call: write an arriving sentence into a free slot (`sources`, `slot_ids`; slot -1: none),
        then advance every slot by up to `steps_per_call` tokens, stopping once `need` sentences ended.
        Fusing the insert saves a call per step under load."""
        parts, filters, steps = self.parts, self.filters, self.steps_per_call
        max_length, end_id, force_end = self.max_length, self.end_id, self.force_end
        bias = loop_ops.padding_bias(parts.vocab_size, self.start_id)

        def step(self_caches, cross_caches, source_mask, rows, uniforms, invariant, sources, slot_ids):
            # `rows` [active, 4 + steps], one conversion per call: each row's last token, position, whether it is
            # free (1), how many rows must end before the call returns (column 3, the same in every row), then
            # its forced tokens (0: none).
            last, positions, done, need = rows[:, 0], rows[:, 1], ops.greater(rows[:, 2], 0), rows[0, 3]
            forced = rows[:, 4:]
            cross_caches, source_mask = self._write_arrival(cross_caches, source_mask, sources, slot_ids)
            active = int(last.shape[0])  # the first `active` slots step; the rest are free
            full_caches = self_caches
            if active < self.slots:
                self_caches = [(k[:active], v[:active]) for k, v in self_caches]
                step_cross = [(k[:active], v[:active]) for k, v in cross_caches]
                step_mask = source_mask[:active]
            else:
                step_cross, step_mask = cross_caches, source_mask
            hoisted = parts.with_loop_invariants(invariant)
            started = done

            def cond(i, last, positions, done, tokens, caches):
                # Up to `steps` tokens, but back to the host once `need` sentences ended (their slots are then free).
                ended = ops.sum(ops.cast(ops.logical_and(done, ops.logical_not(started)), "int32"))
                return ops.logical_and(ops.less(i, steps), ops.less(ended, need))

            def body(i, last, positions, done, tokens, caches):
                logits, caches = hoisted.decode_step(ops.expand_dims(last, 1), positions, caches, step_cross,
                                                     step_mask)
                logits = logits[:, 0] + bias
                if filters is None:
                    chosen = loop_ops.first_argmax(logits)
                else:
                    chosen = sample_token(logits, ops.take(uniforms, i, axis=1), parts.vocab_size, *filters)
                forced_now = ops.abs(ops.take(forced, i, axis=1))  # a negative id: forced at no cost, the same here
                chosen = ops.where(ops.greater(forced_now, 0), forced_now, ops.cast(chosen, "int32"))
                if force_end:
                    chosen = ops.where(ops.equal(positions, max_length - 1), end_id, chosen)
                chosen = ops.where(done, 0, chosen)
                tokens = ops.slice_update(tokens, (ops.zeros((), "int32"), i), ops.expand_dims(chosen, 1))
                done = ops.logical_or(done, ops.logical_or(ops.equal(chosen, end_id),
                                                           ops.greater_equal(positions, max_length - 1)))
                return i + 1, chosen, ops.minimum(positions + 1, max_length - 1), done, tokens, caches

            loop = (ops.zeros((), "int32"), last, positions, done, ops.zeros((active, steps), "int32"), self_caches)
            _, _, _, _, tokens, self_caches = ops.while_loop(cond, body, loop, maximum_iterations=steps)
            if active < self.slots:  # written back into the full caches (in place under XLA)
                zero = (0, 0, 0, 0)
                self_caches = [(ops.slice_update(fk, zero, k), ops.slice_update(fv, zero, v))
                               for (fk, fv), (k, v) in zip(full_caches, self_caches)]
            return tokens, self_caches, cross_caches, source_mask

        return compile_in_place(parts, step, donate=(0, 1, 2))

    def warm_up(self, progress=None):
        """Compile every step and insert this engine can run (each source bucket; each step and insert size) before
        any sentence is submitted, so that no later call compiles. `progress(done, total)` is called after each
        source bucket. Returns how many functions it traced."""
        if not self.idle:
            raise RuntimeError("warm_up() runs before any sentence is submitted")
        before = len(self.compiled_shapes)
        for done, width in enumerate(self.source_buckets, 1):
            self._resize(width)
            for size in self.insert_sizes:
                self._insert(np.ones((size, width), "int32"), np.arange(size, dtype="int32"))
            for active in self.step_sizes:
                self._run_step(np.ones(active, bool))
            if progress is not None:
                progress(done, len(self.source_buckets))
        return len(self.compiled_shapes) - before

    def _insert(self, sources, slot_ids):
        size, width = sources.shape
        self.compiled_shapes.add(("insert", width, size))
        if (width, size) not in self._inserts:  # one function per shape: one trace
            self._inserts[(width, size)] = compile_in_place(
                self.parts, lambda *args: (None, *self._write_sources(*args)), donate=(0, 1))
        _, self._cross_caches, self._source_mask = self._inserts[(width, size)](
            self._cross_caches, self._source_mask, ops.convert_to_tensor(sources), ops.convert_to_tensor(slot_ids))

    def _run_step(self, done, group=None):
        """Advance every slot (after writing `group`, `(sources, slot_ids)`, if given); the new tokens `[slots,
        steps_per_call]` as NumPy."""
        active = len(done)
        self.compiled_shapes.add(("step", self._width, active))
        key = (self._width, active)  # one function per shape: one trace
        function = self._steps[key] if key in self._steps else self._steps.setdefault(key, self._step_function())
        steps = self.steps_per_call
        rows = np.zeros((active, 4 + steps), "int32")
        # A call returns once a quarter of the busy slots (at least one) ended: returning after every sentence that
        # ends pays a call per token under load (measured: up to a third fewer requests/s at 16 and 64 clients).
        need = max(1, self.live // 4) if self.live else 0  # 0 (the warm-up): compiled, not run
        rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3] = self._last[:active], self._positions[:active], done, need
        uniforms = None if self.filters is None else np.full((active, steps), 0.5, "float32")
        for slot, request in enumerate(self.requests[:active]):
            if request is not None:
                request.upcoming(self._positions[slot], rows[slot, 4:], None if uniforms is None else uniforms[slot])
        sources, slot_ids = self._arrival(group)
        tokens, self._self_caches, self._cross_caches, self._source_mask = function(
            self._self_caches, self._cross_caches, self._source_mask, ops.convert_to_tensor(rows),
            None if uniforms is None else ops.convert_to_tensor(uniforms), self._invariant, sources, slot_ids)
        return np.asarray(ops.convert_to_numpy(tokens))

    def _fill_free_slots(self):
        free = [slot for slot, request in enumerate(self.requests) if request is None]
        incoming = []
        while free[len(incoming):] and self.waiting:
            incoming.append(self.waiting.popleft())
        if not incoming:
            return None
        if not self.live and self._invariant is not None and not self.fixed_weights:
            self._refresh_weights()
        self._resize(self._needed_width(incoming))
        chosen = free[: len(incoming)]
        for request, slot in zip(incoming, chosen):
            request.slot = slot
            self.requests[slot] = request
            self._positions[slot] = 0
            self._last[slot] = self.start_id
        # n sentences go in groups of the largest insert size that fits the rest (7: 4, 1, 1 and 1): no row is
        # encoded for nothing (groups padded with copies spent as long in inserts as in steps under load), and the
        # last group of one is written by the step itself.
        groups, start = [], 0
        while start < len(incoming):
            size = max(n for n in self.insert_sizes if n <= len(incoming) - start)
            sources = np.zeros((size, self._width), "int32")
            for row, request in enumerate(incoming[start:start + size]):
                sources[row, : len(request.source)] = request.source
            groups.append((sources, np.asarray(chosen[start:start + size], "int32")))
            start += size
        fused = groups.pop() if len(groups[-1][1]) == 1 else None  # one sentence: written by the step itself
        for group in groups:
            self._insert(*group)
        return fused

    def step(self):
        """Fill free slots from the queue, then advance every slot by `steps_per_call` tokens. Returns the requests
        that ended in this step (their `tokens` complete)."""
        needed = self._needed_width()
        if needed is not None and needed > self._width:  # a row outgrows the caches
            self._resize(needed)
        group = self._fill_free_slots()
        if not self.live:
            return []
        busy = max(slot for slot, request in enumerate(self.requests) if request is not None) + 1
        active = next(n for n in self.step_sizes if n >= busy)
        done = np.array([request is None for request in self.requests[:active]])
        finished = self._collect(self._run_step(done, group), active)
        if finished:
            needed = self._needed_width(self.waiting)
            if needed is not None and needed < self._width:
                self._resize(needed)
        return finished

    def _end(self, request):
        self._positions[request.slot] = 0  # a free row writes (unread) at position 0, inside any cache
        request.done, self.requests[request.slot], request.slot = True, None, None

    def _collect(self, tokens, active):
        """The requests that ended, given the new tokens `[active, steps_per_call]` of a step (0: none)."""
        finished = []
        for slot, request in enumerate(self.requests[:active]):
            if request is None:
                continue
            new = []
            for token in map(int, tokens[slot]):
                if token == 0:
                    break
                new.append(token)
                if token == self.end_id or len(request.tokens_so_far) + len(new) >= self.max_length:
                    break
            request.tokens_so_far.extend(new)
            self._positions[slot] = min(len(request.tokens_so_far), self.max_length - 1)
            if new:
                self._last[slot] = new[-1]
            if request.on_tokens is not None and new:
                request.on_tokens(request, new)
            ended = (request.tokens_so_far and request.tokens_so_far[-1] == self.end_id) or \
                len(request.tokens_so_far) >= self.max_length
            if ended:
                self._end(request)
                finished.append(request)
        return finished

    def run(self, sources, prefixes=None, uniforms=None, arrivals=None, first_tokens=None):
        """Decode every source (a row of ids; 0s at the end are padding); the outputs in order, each an int32 array
        of at most `max_length` tokens (`end_id` last if it ended). `prefixes`, `uniforms` and `first_tokens`: each
        source's forced prefix, random numbers and first token (see `submit`); `arrivals`: per source, the step
        before which it is submitted (default all at once), to decode sentences that join a running batch."""
        count = len(sources)
        arrivals = [0] * count if arrivals is None else [int(a) for a in arrivals]
        requests, step = [None] * count, 0
        pending = collections.deque(sorted(range(count), key=lambda i: arrivals[i]))
        while pending or not self.idle:
            while pending and arrivals[pending[0]] <= step:
                i = pending.popleft()
                requests[i] = self.submit(sources[i], None if prefixes is None else prefixes[i],
                                          None if uniforms is None else uniforms[i],
                                          first_token=None if first_tokens is None else first_tokens[i])
            self.step()
            step += 1
        return [request.tokens for request in requests]
