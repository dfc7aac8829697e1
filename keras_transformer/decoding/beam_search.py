"""Beam search with a length penalty (GNMT's, or transformers' rule), key/value caches and static shapes.

Each source row keeps `beam_size` alive hypotheses. A step scores every continuation of every
alive beam (one decoder position per beam, cached keys/values), takes the `2 * beam_size`
best, moves those among the `beam_size` best that produce `end_id` to the row's finished
hypotheses, and keeps the `beam_size` best others alive (the self-attention caches are
reordered with one gather per layer). At `max_length` every alive beam counts as finished.
`length_penalty_rule` says how finished hypotheses score and when a row is done:

- `"gnmt"` (GNMT's rule): a hypothesis scores `log_prob / ((5 + length) / 6) ** length_penalty`
  (`length` counts `end_id`); the next-token distribution leaves out id 0 and `start_id`. A row is done
  once `beam_size` hypotheses have finished, or once its best finished score beats the best any alive
  beam can still reach.
- `"transformers"` (the rule of transformers' `generate(num_beams=...)` with its default
  `early_stopping=False`, token for token on imported Marian checkpoints): a hypothesis scores
  `log_prob / length ** length_penalty`; the softmax leaves out id 0 but includes `start_id`, which is then
  banned without renormalizing (`next_token_log_probs`). A row is done once `beam_size` hypotheses have
  finished and the best alive beam's log-probability divided by (tokens so far) `** length_penalty` is no
  better than the worst of them; after that it takes no more.

The best `beam_size` finished hypotheses are kept. With `beam_size=1`, GNMT's rule is exactly greedy decoding
(transformers' only with `length_penalty=0`: otherwise its one alive beam may go on to beat the hypothesis
that ended; `generate(num_beams=1)` decodes greedily instead). Id 0 (padding) and `start_id` are never
generated. Shapes are static (`tf.function`, XLA, `jax.jit`, SavedModel).
"""

import keras
from keras import ops

from keras_transformer.decoding import arguments
from keras_transformer.decoding import compiled_decoders
from keras_transformer.decoding import loop_ops

# GNMT's alpha as the paper's beam search uses it; `keras-transformer tune` chooses a run's own on held-out data.
DEFAULT_LENGTH_PENALTY = 0.6
# How finished hypotheses are scored and when a row stops (see `beam_search`): GNMT's rule, or the one of
# transformers' `generate(num_beams=...)` (what imported Marian checkpoints decode with there).
LENGTH_PENALTY_RULES = ("gnmt", "transformers")
DEFAULT_LENGTH_PENALTY_RULE = "gnmt"


def gnmt_length_penalty(length, alpha):
    """The length penalty of GNMT (Wu et al., 2016): `((5 + length) / 6) ** alpha`.

    A hypothesis of `length` tokens (its end token included) and summed log-probability
    `log_prob` scores `log_prob / gnmt_length_penalty(length, alpha)`; `alpha=0` is no penalty.

    Args:
        length: int or tensor of lengths.
        alpha: float >= 0.

    Returns:
        float32 tensor of the penalty, shaped like `length`.

    Example:

    >>> float(gnmt_length_penalty(1, 0.6))
    1.0

    References:
        - [Wu et al., 2016](https://arxiv.org/abs/1609.08144), section 7.
    """
    return ops.power((5.0 + ops.cast(length, "float32")) / 6.0, alpha)


def check_length_penalty_rule(rule):
    """`rule` if it is one of `LENGTH_PENALTY_RULES`, else a `ValueError` naming them."""
    if not isinstance(rule, str) or rule not in LENGTH_PENALTY_RULES:
        raise ValueError(f"`length_penalty_rule` must be one of {', '.join(map(repr, LENGTH_PENALTY_RULES))}; "
                         f"got {rule!r}.")
    return rule


def length_penalty_divisor(length, alpha, rule="gnmt"):
    """What a finished hypothesis's summed log-probability is divided by, float32 shaped like `length`.

    `"gnmt"`: `((5 + length) / 6) ** alpha` (`gnmt_length_penalty`); `"transformers"`: `length ** alpha`, as
    transformers' beam search (its `length_penalty` is this `alpha`). `length` counts the end token.

    Example:

    >>> float(length_penalty_divisor(4, 1.0, "transformers")), float(length_penalty_divisor(4, 0.0))
    (4.0, 1.0)
    """
    if check_length_penalty_rule(rule) == "transformers":
        return ops.power(ops.cast(length, "float32"), alpha)
    return gnmt_length_penalty(length, alpha)


def log_prob_biases(vocab_size, start_id, rule="gnmt"):
    """`(before, after)`: the float32 `[vocab]` biases of `next_token_log_probs` (`after` is `None` for `"gnmt"`)."""
    banned = loop_ops.padding_bias(vocab_size, start_id)
    if check_length_penalty_rule(rule) == "gnmt":
        return banned, None
    return loop_ops.padding_bias(vocab_size), banned


def next_token_log_probs(logits, start_id, rule="gnmt"):
    """Float32 log-probabilities `[..., vocab]` of the next token; id 0 (padding) and `start_id` are never generated.

    `"gnmt"`: both are removed from the softmax (the others renormalized). `"transformers"`: id 0 is removed, the
    softmax runs over every other id, `start_id` included, and `start_id` is then banned (`loop_ops.NEG` added)
    without renormalizing, as transformers' `bad_words_ids` bans Marian's pad token (whose logit an imported Marian
    model carries at `start_id`; its id 0 is an extra row).
    """
    before, after = log_prob_biases(int(logits.shape[-1]), start_id, rule)
    log_probs = ops.log_softmax(ops.cast(logits, "float32") + before, axis=-1)
    return log_probs if after is None else log_probs + after


def beam_search_with_parts(
    parts, encoder_inputs, max_length, start_id, end_id, beam_size=4, length_penalty=0.6, stop_early=True,
    length_penalty_rule="gnmt", force_end=False, prefix=None, num_hypotheses=1, first_token=None,
):
    """Beam search at full width: `(tokens, scores)`, int32 `[B, max_length]` and float32 `[B]`.

    The entry point for code that traces its own function (an exporter): shapes are static (the
    tokens are never trimmed), and `parts` may be a `TransformerParts` (no `keras.Model` needed)
    or a model. See `beam_search` for the arguments and the algorithm.

    `prefix` (int32 `[B, P]`, 0-padded) forces each row's first tokens (they keep their log-probabilities in the
    scores); `first_token` (int32 `[B]`) is each row's first token at no cost, as transformers'
    `forced_bos_token_id` forces a multilingual model's target language. `num_hypotheses` n > 1 (at most
    `beam_size`) returns the n best finished hypotheses, best first: `[B, n, max_length]` and `[B, n]`, a score of
    `loop_ops.NEG` marking a hypothesis that did not finish.
    """
    parts, max_length, start_id, end_id = arguments.check_decoding_args(parts, max_length, start_id, end_id)
    beam_size = arguments.check_positive_int("beam_size", beam_size)
    length_penalty = arguments.check_number("length_penalty", length_penalty, low=0.0)
    length_penalty_rule = check_length_penalty_rule(length_penalty_rule)
    num_hypotheses = arguments.check_positive_int("num_hypotheses", num_hypotheses)
    if num_hypotheses > beam_size:
        raise ValueError(f"num_hypotheses={num_hypotheses} exceeds beam_size={beam_size}: a beam keeps at most "
                         "beam_size hypotheses")
    return _beam_search_alpha_input(
        parts, encoder_inputs, length_penalty, max_length, start_id, end_id, beam_size, stop_early,
        length_penalty_rule, bool(force_end), prefix, num_hypotheses, first_token,
    )


def _beam_search(parts, encoder_inputs, max_length, start_id, end_id, beam_size, length_penalty, stop_early,
                 rule, force_end=False, prefix=None, num_hypotheses=1, first_token=None):
    loop = _BeamLoop(parts.with_loop_invariants(), encoder_inputs, max_length, start_id, end_id, beam_size,
                     length_penalty, stop_early, rule, force_end, prefix, num_hypotheses, first_token)
    outputs = ops.while_loop(loop.cond, loop.body, loop.initial_state(), maximum_iterations=max_length)
    fin_seq, fin_score = outputs[4], outputs[5]
    if num_hypotheses > 1:  # best first; a hypothesis that never finished scores loop_ops.NEG
        return fin_seq[:, :num_hypotheses], fin_score[:, :num_hypotheses]
    return fin_seq[:, 0], fin_score[:, 0]


class _BeamLoop:
    """One beam search's constants, and the `cond` and `body` of its `while_loop`.

    Rows are laid out as `b * k + beam`. The loop state is `(step, last, alive_seq, alive_logp, fin_seq, fin_score,
    fin_flag, done, caches)`.
    """

    def __init__(self, parts, encoder_inputs, max_length, start_id, end_id, k, length_penalty, stop_early, rule,
                 force_end, prefix, num_hypotheses, first_token):
        self.parts, self.k, self.max_length, self.start_id, self.end_id = parts, k, max_length, start_id, end_id
        self.stop_early, self.rule, self.force_end, self.num_hypotheses = stop_early, rule, force_end, num_hypotheses
        self.vocab = vocab = parts.vocab_size
        encoder_outputs, padding_mask = parts.encode(encoder_inputs)
        # Encoder work and cross-attention projections happen once per source row, then the
        # results are repeated for the row's `k` beams.
        self.cross_caches = keras.tree.map_structure(lambda c: ops.repeat(c, k, axis=0),
                                                     parts.cross_attention_caches(encoder_outputs))
        self.padding_mask = ops.repeat(padding_mask, k, axis=0)
        self.batch_size = ops.shape(encoder_inputs)[0]
        self.bias, self.bias_after = log_prob_biases(vocab, start_id, rule)
        self.end_only = ops.where(ops.equal(ops.arange(vocab, dtype="int32"), end_id), 0.0, loop_ops.NEG)[None]
        self.zero = ops.zeros((), dtype="int32")
        self.row_index = ops.expand_dims(ops.arange(self.batch_size, dtype="int32"), 1)  # [B, 1]
        # alpha per row, [B, 1]: a Python float, a scalar or a [B] tensor (the compiled path passes it as an input,
        # so one compiled loop serves every alpha `keras-transformer tune` tries).
        self.alpha = ops.reshape(ops.cast(length_penalty, "float32") * ops.ones((self.batch_size,), "float32"),
                                 (-1, 1))
        self.longest_penalty = gnmt_length_penalty(max_length, self.alpha)[:, 0] if rule == "gnmt" else None
        self.prefix = None if prefix is None else ops.repeat(ops.cast(prefix, "int32"), k, axis=0)  # [B*k, P]
        self.first_only = None
        if first_token is not None:  # [B*k, V]: 0 at each row's first token, NEG elsewhere
            self.first_only = ops.where(ops.equal(ops.arange(vocab, dtype="int32")[None],
                                                  ops.repeat(ops.cast(first_token, "int32"), k, axis=0)[:, None]),
                                        0.0, loop_ops.NEG)

    def initial_state(self):
        b, k, length = self.batch_size, self.k, self.max_length
        first_beam = ops.where(ops.equal(ops.arange(k, dtype="int32"), 0), 0.0, loop_ops.NEG)
        return (
            self.zero,
            ops.full((b * k,), self.start_id, dtype="int32"),
            ops.zeros((b, k, length), dtype="int32"),
            ops.zeros((b, k), dtype="float32") + first_beam[None],  # all beams start equal
            ops.zeros((b, k, length), dtype="int32"),
            ops.full((b, k), loop_ops.NEG, dtype="float32"),
            ops.zeros((b, k), dtype="bool"),
            ops.zeros((b,), dtype="bool"),
            self.parts.empty_self_attention_caches(b * k, length),
        )

    def cond(self, step, last, alive_seq, alive_logp, fin_seq, fin_score, fin_flag, done, caches):
        running = ops.less(step, self.max_length)
        if self.stop_early:
            running = ops.logical_and(running, ops.logical_not(ops.all(done)))
        return running

    def log_probs(self, logits, step):
        """`[B*k, V]` log-probabilities of the next token, with every forced or banned token applied."""
        log_probs = ops.log_softmax(logits[:, 0] + self.bias, axis=-1)
        if self.bias_after is not None:
            log_probs = log_probs + self.bias_after
        if self.force_end:  # at the last position only `end_id` may come, at no cost (transformers' forced_eos)
            log_probs = ops.where(ops.equal(step, self.max_length - 1), self.end_only, log_probs)
        if self.prefix is not None:  # a forced token keeps its log-probability; every other token is ruled out
            forcing, forced = loop_ops.forced_at(self.prefix, step)
            vocab_ids = ops.arange(self.vocab, dtype="int32")[None]
            ruled_out = ops.logical_and(forcing[:, None], ops.not_equal(vocab_ids, forced[:, None]))
            log_probs = ops.where(ruled_out, loop_ops.NEG, log_probs)
        if self.first_only is not None:
            log_probs = ops.where(ops.equal(step, 0), self.first_only, log_probs)
        return log_probs

    def body(self, step, last, alive_seq, alive_logp, fin_seq, fin_score, fin_flag, done, caches):
        logits, caches = self.parts.decode_step(
            ops.expand_dims(last, 1), step, caches, self.cross_caches, self.padding_mask
        )
        last, parents, alive_logp, alive_seq, fin_seq, fin_score, fin_flag, penalty = select_beams(
            self.log_probs(logits, step), step, alive_logp, alive_seq, fin_seq, fin_score, fin_flag, done,
            self.end_id, self.alpha, self.rule, self.row_index)
        caches = keras.tree.map_structure(lambda c: ops.take(c, parents, axis=0), caches)  # one gather per tensor
        done = ops.logical_or(done, rows_done(alive_logp, fin_score, fin_flag, penalty, self.rule,
                                              self.num_hypotheses, self.longest_penalty))
        return step + 1, last, alive_seq, alive_logp, fin_seq, fin_score, fin_flag, done, caches


def select_beams(log_probs, positions, alive_logp, alive_seq, fin_seq, fin_score, fin_flag, done, end_id, alpha,
                 rule, row_index):
    """One beam-search step of `G` groups of `k` beams, from the next-token `log_probs` `[G*k, V]`.

    Takes the `2k` best continuations, moves those among the `k` best that end (all of them at the last position)
    to the finished hypotheses of the groups not `done`, and keeps the `k` best others alive. `positions` is the
    step (a scalar) or each group's own position (`[G, 1]`), `alpha` `[G, 1]`, `row_index` `[G, 1]` the group
    numbers. Returns `(last [G*k], parents [G*k], alive_logp, alive_seq, fin_seq, fin_score, fin_flag,
    penalty [G, 1])`: `parents` are the rows whose caches the new beams continue.
    """
    k, max_length = alive_logp.shape[1], alive_seq.shape[2]
    vocab = log_probs.shape[-1]
    totals = ops.reshape(log_probs, (-1, k, vocab)) + ops.expand_dims(alive_logp, 2)
    # 2k candidates: even if k of them end here, k can stay alive.
    top_logp, top_index = ops.top_k(ops.reshape(totals, (-1, k * vocab)), 2 * k)
    top_index = ops.cast(top_index, "int32")
    top_beam, top_token = ops.floor_divide(top_index, vocab), ops.mod(top_index, vocab)

    def gather_rows(sequences, index, width):
        """`sequences [G, width, L]`, `index [G, n]` -> `[G, n, L]`: each group's chosen entries."""
        return ops.take(ops.reshape(sequences, (-1, max_length)), index + row_index * width, axis=0)

    cand_seq = gather_rows(alive_seq, top_beam, k)  # [G, 2k, L]
    if len(positions.shape) == 0:
        zero = ops.zeros((), "int32")
        cand_seq = ops.slice_update(cand_seq, (zero, zero, positions), ops.expand_dims(top_token, 2))
    else:
        places = ops.arange(max_length, dtype="int32")[None, None]
        cand_seq = ops.where(ops.equal(places, positions[:, :, None]), top_token[:, :, None], cand_seq)

    # Finished: candidates among the k best that end; groups already done take no more.
    is_end = ops.equal(top_token, end_id)
    ends = ops.logical_or(is_end, ops.equal(positions, max_length - 1))
    first_ranks = ops.less(ops.arange(2 * k, dtype="int32"), k)[None]  # [1, 2k]
    new_flag = ops.logical_and(ops.logical_and(first_ranks, ends), ops.expand_dims(ops.logical_not(done), 1))
    new_flag = ops.logical_and(new_flag, ops.greater(top_logp, loop_ops.NEG / 2))
    penalty = length_penalty_divisor(positions + 1, alpha, rule)  # [G, 1]
    new_score = ops.where(new_flag, top_logp / penalty, loop_ops.NEG)
    fin_score, keep = ops.top_k(ops.concatenate([fin_score, new_score], axis=1), k)
    keep = ops.cast(keep, "int32")
    fin_flag = ops.take_along_axis(ops.concatenate([fin_flag, new_flag], axis=1), keep, axis=1)
    fin_seq = gather_rows(ops.concatenate([fin_seq, cand_seq], axis=1), keep, 3 * k)

    # Alive: the k best candidates that did not end.
    alive_logp, keep = ops.top_k(ops.where(is_end, loop_ops.NEG, top_logp), k)
    keep = ops.cast(keep, "int32")
    alive_seq = gather_rows(cand_seq, keep, 2 * k)
    last = ops.reshape(ops.take_along_axis(top_token, keep, axis=1), (-1,))
    parents = ops.reshape(ops.take_along_axis(top_beam, keep, axis=1) + row_index * k, (-1,))
    return last, parents, alive_logp, alive_seq, fin_seq, fin_score, fin_flag, penalty


def rows_done(alive_logp, fin_score, fin_flag, penalty, rule, num_hypotheses, longest_penalty):
    """`[G]`: the groups whose `num_hypotheses` best finished hypotheses no alive beam can change any more."""
    full = ops.all(fin_flag, axis=1)
    if rule == "gnmt":
        # A group is done when k hypotheses have ended, or when its best finished score beats
        # what the best alive beam could still reach (log-probs only fall; penalty <= longest).
        # (With n-best, the n-th best finished score must be out of reach.)
        n = num_hypotheses - 1
        unbeatable = ops.logical_and(fin_flag[:, n], fin_score[:, n] >= alive_logp[:, 0] / longest_penalty)
        return ops.logical_or(full, unbeatable)
    # transformers' rule (`early_stopping=False`): done once k hypotheses have ended and the best alive
    # beam, scored at its present length, does not beat the worst of them.
    settled = ops.less_equal(alive_logp[:, 0] / penalty[:, 0], fin_score[:, -1])
    return ops.logical_and(full, settled)


def _beam_search_alpha_input(parts, encoder_inputs, length_penalty, max_length, start_id, end_id, beam_size,
                             stop_early, length_penalty_rule="gnmt", force_end=False, prefix=None, num_hypotheses=1,
                             first_token=None):
    """`beam_search_with_parts` without its checks; `length_penalty` may also be a float32 `[B]` tensor."""
    with loop_ops.weights_read_once(parts):
        return _beam_search(
            parts, encoder_inputs, max_length, start_id, end_id, beam_size, length_penalty, stop_early,
            length_penalty_rule, force_end, prefix, num_hypotheses, first_token,
        )


def beam_search(model, encoder_inputs, max_length, start_id, end_id, beam_size=4, length_penalty=0.6,
                return_scores=False, stop_early=True, jit_compile=None, length_penalty_rule="gnmt", force_end=False):
    """Beam search with a length penalty and key/value caches; the best hypothesis per row.

    The algorithm and its two `length_penalty_rule`s are described at the top of this module. Id 0 (padding) and
    `start_id` are never generated. Shapes are static (`tf.function`, XLA, `jax.jit`, SavedModel).

    Args:
        model: a model from `build_transformer` (or loaded back from `.keras`), or its `TransformerParts`.
        encoder_inputs: int `[batch, source_length]` source ids, 0 = padding.
        max_length: Python int >= 1. Most tokens per hypothesis (`end_id` included).
        start_id: Python int. The first decoder input.
        end_id: Python int. The id that ends a hypothesis.
        beam_size: Python int >= 1.
        length_penalty: float >= 0, the exponent of the length penalty (GNMT's alpha, or transformers'
            `length_penalty`); 0 ranks by summed log-probability.
        return_scores: bool. Also return each row's best score.
        stop_early: bool. End the loop once every row is done (checked in the loop
            condition); `False` runs `max_length` steps with the same results.
        jit_compile: `None` (default): eager callers on TensorFlow and JAX run an XLA-compiled function (cached
            per model and settings; the length penalty is one of its inputs, so many alphas compile once), traced
            callers and PyTorch the plain one. `True` always compiles (eager inputs only), `False` never.
        length_penalty_rule: `"gnmt"` (default) or `"transformers"` (see the module's documentation).
        force_end: bool. At the last position (`max_length`) only `end_id` may come, at no cost, as with
            transformers' `forced_eos_token_id` (Marian checkpoints set it).

    Returns:
        int32 `[batch, L]`, `L <= max_length`: each row's best hypothesis, the tokens after
        `start_id`, with `end_id` at its end (unless it reached `max_length` without one) and 0
        after it. Eagerly `L` is the longest row's length; inside a traced function
        `L == max_length`. With `return_scores=True`, `(tokens, scores)` where `scores` is
        float32 `[batch]`, the length-penalized log-probability of each returned hypothesis.

    Example:

    >>> import numpy as np
    >>> from keras_transformer import build_transformer
    >>> model = build_transformer(50, 50, num_layers=1, d_model=16, num_heads=2, d_ff=32)
    >>> tokens, scores = beam_search(
    ...     model, np.array([[5, 6, 7]]), max_length=6, start_id=1, end_id=2, beam_size=3,
    ...     return_scores=True)
    >>> tuple(scores.shape)
    (1,)

    References:
        - [Wu et al., 2016](https://arxiv.org/abs/1609.08144), section 7 (length penalty).
        - transformers' [beam search](https://huggingface.co/docs/transformers/generation_strategies)
          (`"transformers"`).
    """
    parts, max_length, start_id, end_id = arguments.check_decoding_args(model, max_length, start_id, end_id)
    beam_size = arguments.check_positive_int("beam_size", beam_size)
    length_penalty = arguments.check_number("length_penalty", length_penalty, low=0.0)
    length_penalty_rule = check_length_penalty_rule(length_penalty_rule)
    encoder_inputs = arguments.check_encoder_inputs(encoder_inputs)
    settings = dict(
        max_length=max_length, start_id=start_id, end_id=end_id, beam_size=beam_size,
        length_penalty=length_penalty, stop_early=stop_early, length_penalty_rule=length_penalty_rule,
        force_end=bool(force_end),
    )
    if compiled_decoders.use_compiled(jit_compile, encoder_inputs):
        # The length penalty is an input of the compiled function, not a setting: a new alpha reuses the code.
        alpha = settings.pop("length_penalty")
        rows = loop_ops.concrete_int(ops.shape(encoder_inputs)[0])
        inputs = {"encoder_inputs": encoder_inputs, "length_penalty": ops.full((rows,), alpha, dtype="float32")}
        tokens, scores = compiled_decoders.run_compiled(model, parts, _beam_search_alpha_input, inputs, settings)
        scores = ops.convert_to_tensor(scores)
    else:
        tokens, scores = beam_search_with_parts(parts, encoder_inputs, **settings)
    tokens = loop_ops.trim_to_longest(tokens)
    return (tokens, scores) if return_scores else tokens
