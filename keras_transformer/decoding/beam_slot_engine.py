"""Beam search with continuous batching: a sentence takes a group of `beam` decoder rows, one per beam.

`BeamSlotEngine` is a `SlotEngine` (submit, step, cancel, warm_up, run) whose slots each hold one sentence's beams:
`slots` sentences decode together in `slots * beam` rows. A step runs `beam_search`'s step for every group at
its own position (scores the continuations of its beams, moves those that end to its finished hypotheses, keeps
the best others alive and reorders their self-attention caches), and a sentence leaves its slot the step its beam
search is done, by the same rule (`length_penalty_rule`) and with the same tokens as `beam_search` gives it in any
batch. Its hypotheses (`num_hypotheses` best, with their scores) come back together when it ends; forced prefixes
keep their log-probabilities, as in `beam_search_with_parts(prefix=...)`, and a `first_token` costs nothing, as
`beam_search_with_parts(first_token=...)`.
"""

import keras
import numpy as np
from keras import ops

from keras_transformer.decoding import arguments
from keras_transformer.decoding import loop_ops
from keras_transformer.decoding.beam_search import gnmt_length_penalty
from keras_transformer.decoding.beam_search import log_prob_biases
from keras_transformer.decoding.beam_search import rows_done
from keras_transformer.decoding.beam_search import select_beams
from keras_transformer.decoding.in_place import compile_in_place
from keras_transformer.decoding.in_place import state_holder
from keras_transformer.decoding.samplers import BeamSampler
from keras_transformer.decoding.slot_engine import SlotEngine


class BeamSlotEngine(SlotEngine):
    """Beam search in slots that sentences enter and leave between steps (continuous batching).

    Args: those of `SlotEngine` (`slots`: sentences decoded together, each in `beam` rows), and
        sampler: a `BeamSampler`: its `num_beams`, `length_penalty`, `length_penalty_rule` and `force_end`.
        num_hypotheses: Python int, at most `num_beams`: the best finished hypotheses each sentence returns
            (`SlotRequest.hypotheses`, best first, each `(tokens, score)`).

    Example:

    >>> import numpy as np
    >>> from keras_transformer import build_transformer
    >>> from keras_transformer.decoding import BeamSampler
    >>> model = build_transformer(50, 50, num_layers=1, d_model=16, num_heads=2, d_ff=32)
    >>> engine = BeamSlotEngine(model, max_length=8, start_id=1, end_id=2, slots=2, sampler=BeamSampler(3))
    >>> outputs = engine.run([np.array([5, 6, 7]), np.array([8, 9]), np.array([10, 11, 12, 13])])
    >>> len(outputs), all(1 <= len(tokens) <= 8 for tokens in outputs)
    (3, True)
    """

    def __init__(self, model, max_length, start_id, end_id, slots=8, sampler=None, steps_per_call=1,
                 source_buckets=None, fixed_weights=False, num_hypotheses=1):
        self.num_hypotheses = arguments.check_positive_int("num_hypotheses", num_hypotheses)
        super().__init__(model, max_length, start_id, end_id, slots=slots, sampler=sampler or BeamSampler(),
                         steps_per_call=steps_per_call, source_buckets=source_buckets, fixed_weights=fixed_weights)
        self._beam_state = None

    def _configure(self, sampler):
        if not isinstance(sampler, BeamSampler):
            raise ValueError(f"BeamSlotEngine decodes with a BeamSampler; got {type(sampler).__name__} (greedy "
                             "decoding and sampling run in a SlotEngine).")
        self.beam = arguments.check_positive_int("num_beams", sampler.num_beams)
        if self.num_hypotheses > self.beam:
            raise ValueError(f"num_hypotheses={self.num_hypotheses} exceeds num_beams={self.beam}: a beam keeps at "
                             "most num_beams hypotheses")
        self.length_penalty = arguments.check_number("length_penalty", sampler.length_penalty, low=0.0)
        self.rule, self.force_end = sampler.length_penalty_rule, sampler.force_end
        self.filters, self.seed = None, None

    def _state(self):
        """Each group's search, on the device: its beams' last tokens `[rows]`, alive log-probabilities, alive
        and finished sequences, finished scores and flags (`[slots, beam(, max_length)]`)."""
        if self._beam_state is None:
            shape = (self.slots, self.beam)
            self._beam_state = [state_holder(x) for x in (
                ops.zeros((self.slots * self.beam,), "int32"), ops.zeros(shape, "float32"),
                ops.zeros(shape + (self.max_length,), "int32"), ops.zeros(shape + (self.max_length,), "int32"),
                ops.zeros(shape, "float32"), ops.zeros(shape, "bool"))]
        return self._beam_state

    def _step_function(self):
        """One compiled call: write an arriving sentence into a free slot (slot -1: none), start new groups, then
        run up to `steps_per_call` beam-search steps on every group, stopping once `need` groups are done."""
        parts, k, steps, length = self.parts, self.beam, self.steps_per_call, self.max_length
        start_id, end_id, rule, force_end, n = self.start_id, self.end_id, self.rule, self.force_end, \
            self.num_hypotheses
        vocab = parts.vocab_size
        bias, bias_after = log_prob_biases(vocab, start_id, rule)
        vocab_ids = ops.arange(vocab, dtype="int32")[None]
        end_only = ops.where(ops.equal(vocab_ids, end_id), 0.0, loop_ops.NEG)

        def step(self_caches, cross_caches, source_mask, state, rows, alphas, invariant, sources, slot_ids):
            # `rows` [groups, 4 + steps]: each group's position, whether it is free (1), new (1), how many groups
            # must end before the call returns (the same in every row), then its forced tokens (0: none).
            positions, done, fresh, need = rows[:, 0], ops.greater(rows[:, 1], 0), ops.greater(rows[:, 2], 0), \
                rows[0, 3]
            forced = rows[:, 4:]
            cross_caches, source_mask = self._write_arrival(cross_caches, source_mask, sources, slot_ids)
            groups = int(positions.shape[0])
            active = groups * k  # the first `active` rows step; the rest are free
            full_caches, full_state = self_caches, state
            if groups < self.slots:
                self_caches = [(c[:active], v[:active]) for c, v in self_caches]
                step_cross = [(c[:active], v[:active]) for c, v in cross_caches]
                step_mask = source_mask[:active]
                state = [state[0][:active]] + [s[:groups] for s in state[1:]]
            else:
                step_cross, step_mask = cross_caches, source_mask
            last, alive_logp, alive_seq, fin_seq, fin_score, fin_flag = _started_fresh(state, fresh, start_id)
            alpha = ops.expand_dims(alphas, 1)  # [groups, 1]
            longest_penalty = gnmt_length_penalty(length, alpha)[:, 0] if rule == "gnmt" else None
            group_index = ops.expand_dims(ops.arange(groups, dtype="int32"), 1)
            hoisted = parts.with_loop_invariants(invariant)
            started = done

            def cond(i, positions, done, last, alive_logp, alive_seq, fin_seq, fin_score, fin_flag, caches):
                ended = ops.sum(ops.cast(ops.logical_and(done, ops.logical_not(started)), "int32"))
                return ops.logical_and(ops.less(i, steps), ops.less(ended, need))

            def body(i, positions, done, last, alive_logp, alive_seq, fin_seq, fin_score, fin_flag, caches):
                row_positions = ops.repeat(positions, k)
                logits, caches = hoisted.decode_step(ops.expand_dims(last, 1), row_positions, caches, step_cross,
                                                     step_mask)
                log_probs = ops.log_softmax(logits[:, 0] + bias, axis=-1)
                if bias_after is not None:
                    log_probs = log_probs + bias_after
                if force_end:
                    log_probs = ops.where(ops.equal(row_positions, length - 1)[:, None], end_only, log_probs)
                forced_now = ops.repeat(ops.take(forced, i, axis=1), k)  # negative: forced at no cost
                token_now = ops.abs(forced_now)
                ruled_out = ops.logical_and(ops.greater(token_now, 0)[:, None],
                                            ops.not_equal(vocab_ids, token_now[:, None]))
                log_probs = ops.where(ruled_out, loop_ops.NEG,
                                      ops.where(ops.less(forced_now, 0)[:, None], 0.0, log_probs))
                last, parents, alive_logp, alive_seq, fin_seq, fin_score, fin_flag, penalty = select_beams(
                    log_probs, positions[:, None], alive_logp, alive_seq, fin_seq, fin_score, fin_flag, done, end_id,
                    alpha, rule, group_index)
                caches = keras.tree.map_structure(lambda c: ops.take(c, parents, axis=0), caches)
                ended = rows_done(alive_logp, fin_score, fin_flag, penalty, rule, n, longest_penalty)
                done = ops.logical_or(done, ops.logical_or(ended, ops.greater_equal(positions, length - 1)))
                return (i + 1, ops.minimum(positions + 1, length - 1), done, last, alive_logp, alive_seq, fin_seq,
                        fin_score, fin_flag, caches)

            loop = (ops.zeros((), "int32"), positions, done, last, alive_logp, alive_seq, fin_seq, fin_score,
                    fin_flag, self_caches)
            taken, _, done, *state, self_caches = ops.while_loop(cond, body, loop, maximum_iterations=steps)
            result = (taken, done, state[3][:, :n], state[4][:, :n])
            if groups < self.slots:  # written back into the full caches and state (in place under XLA)
                self_caches = [(ops.slice_update(fk, (0, 0, 0, 0), c), ops.slice_update(fv, (0, 0, 0, 0), v))
                               for (fk, fv), (c, v) in zip(full_caches, self_caches)]
                state = [ops.slice_update(full, (0,) * len(full.shape), part)
                         for full, part in zip(full_state, state)]
            return result, self_caches, cross_caches, source_mask, state

        return compile_in_place(parts, step, donate=(0, 1, 2, 3))

    def _run_step(self, done, group=None):
        """Run the step on the first `len(done)` slots (after writing `group`, `(sources, slot_ids)`); returns
        `(steps taken, done [active], hypotheses [active, n, max_length], scores [active, n])` as NumPy."""
        active = len(done)
        self.compiled_shapes.add(("step", self._width, active))
        key = (self._width, active)
        function = self._steps[key] if key in self._steps else self._steps.setdefault(key, self._step_function())
        rows = np.zeros((active, 4 + self.steps_per_call), "int32")
        need = max(1, self.live // 4) if self.live else 0  # as `SlotEngine` (0: the warm-up, compiled, not run)
        rows[:, 0], rows[:, 1], rows[:, 3] = self._positions[:active], done, need
        for slot, request in enumerate(self.requests[:active]):
            if request is not None:
                rows[slot, 2] = self._positions[slot] == 0  # new: it has not stepped yet
                request.upcoming(self._positions[slot], rows[slot, 4:], None)
        sources, slot_ids = self._arrival(group)
        result, self._self_caches, self._cross_caches, self._source_mask, self._beam_state = function(
            self._self_caches, self._cross_caches, self._source_mask, self._state(), ops.convert_to_tensor(rows),
            ops.convert_to_tensor(np.full(active, self.length_penalty, "float32")), self._invariant, sources,
            slot_ids)
        return [np.asarray(ops.convert_to_numpy(x)) for x in result]

    def _collect(self, result, active):
        taken, done, hypotheses, scores = result
        finished = []
        for slot, request in enumerate(self.requests[:active]):
            if request is None:
                continue
            self._positions[slot] = min(self._positions[slot] + int(taken), self.max_length - 1)
            if not done[slot]:
                continue
            request.hypotheses = [(_trimmed(tokens), float(score)) for tokens, score in
                                  zip(hypotheses[slot], scores[slot])]
            request.tokens_so_far = request.hypotheses[0][0].tolist()
            if request.on_tokens is not None and request.tokens_so_far:
                request.on_tokens(request, list(request.tokens_so_far))
            self._end(request)
            finished.append(request)
        return finished


def _started_fresh(state, fresh, start_id):
    """The groups' search state, with each `fresh` group started as `beam_search` starts a row: one live beam
    (its last token `start_id`), nothing finished."""
    last, alive_logp, alive_seq, fin_seq, fin_score, fin_flag = state
    k = alive_logp.shape[1]
    first_beam = ops.where(ops.equal(ops.arange(k, dtype="int32"), 0), 0.0, loop_ops.NEG)[None]
    return (ops.where(ops.repeat(fresh, k), start_id, last),
            ops.where(fresh[:, None], first_beam, alive_logp),
            ops.where(fresh[:, None, None], 0, alive_seq),
            ops.where(fresh[:, None, None], 0, fin_seq),
            ops.where(fresh[:, None], loop_ops.NEG, fin_score),
            ops.logical_and(fin_flag, ops.logical_not(fresh[:, None])))


def _trimmed(row):
    nonzero = np.flatnonzero(row)
    return np.asarray(row[: nonzero[-1] + 1] if nonzero.size else row[:0], "int32")
