"""Learning a subword vocabulary: tensorflow-text's WordPiece learner (with a faster threshold search and a
progress bar), and the detokenization flags learned from the corpus (`learn_attachment`).
"""

import math

import keras
import numpy as np
import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

from keras_transformer.data.words import SPLIT
from keras_transformer.data.words import char_class

RESERVED_TOKENS = ("[PAD]", "[UNK]", "[START]", "[END]")
SUFFIX_INDICATOR = "##"


def learn_wordpiece_vocabulary(word_counts, vocab_size, reserved_tokens, lower_thresh, max_unique_chars, verbose):
    """Runs tensorflow-text's WordPiece learner, showing the threshold search on a progress bar."""
    items = [(word, count) for word, count in word_counts.items()]
    if not items:
        raise ValueError("cannot learn a vocabulary from an empty text collection")
    params = learner.Params(
        upper_thresh=int(1e7),
        lower_thresh=lower_thresh,
        num_iterations=4,
        max_input_tokens=int(5e6),
        max_token_length=50,
        max_unique_chars=max_unique_chars,
        vocab_size=vocab_size,
        slack_ratio=0.05,
        include_joiner_token=True,
        joiner=SUFFIX_INDICATOR,
        reserved_tokens=list(reserved_tokens),
    )
    # The preparation steps of `learner.learn`, then its search over the count threshold written out: the search
    # bisects the threshold geometrically (the answer is usually a small count, far below the largest word count,
    # so this needs about half the trials of plain bisection; each trial re-runs the whole learner), remembers the
    # largest vocabulary that fits, and advances a progress bar per trial.
    upper, lower = learner.get_search_threshs(items, params.upper_thresh, params.lower_thresh)
    all_counts = learner.get_input_words(items, params.reserved_tokens, params.max_token_length)
    allowed_chars = learner.get_allowed_chars(all_counts, params.max_unique_chars)
    filtered = learner.filter_input_words(all_counts, allowed_chars, params.max_input_tokens)
    progbar = keras.utils.Progbar(None, verbose=verbose, unit_name="trial", stateful_metrics=["threshold", "size"])
    slack = max(params.slack_ratio * vocab_size, 0)
    best = smallest = None
    trial = 0
    lower = max(lower, 1)
    while True:
        threshold = min(max(int(round(math.sqrt(lower * upper))), lower), upper)
        vocab = learner.learn_with_thresh(filtered, threshold, params)
        trial += 1
        progbar.update(trial, [("threshold", threshold), ("size", len(vocab))])
        if len(vocab) <= vocab_size and (best is None or len(vocab) > len(best)):
            best = vocab
        if smallest is None or len(vocab) < len(smallest):
            smallest = vocab
        if len(vocab) <= vocab_size and vocab_size - len(vocab) <= slack:
            break
        if len(vocab) > vocab_size:
            lower = threshold + 1
        else:
            upper = threshold - 1
        if lower > upper:
            break
    if verbose:
        progbar.update(trial, finalize=True)
    return best if best is not None else smallest


def _token_offsets(tokenizer, texts, batch_size, verbose):
    """`(ids, row index, start offsets, end offsets)` of every token of `texts`, flat int64 arrays."""
    parts = []  # (values, row index, starts, ends) per batch
    progbar = keras.utils.Progbar(len(texts), verbose=verbose, unit_name="line") if verbose else None
    for begin in range(0, len(texts), batch_size):
        batch = tf.constant(texts[begin : begin + batch_size], tf.string)
        ids, starts, ends = tokenizer.tokenize_with_offsets(batch)
        rows = ids.value_rowids().numpy() + begin
        parts.append((ids.flat_values.numpy(), rows, starts.flat_values.numpy(), ends.flat_values.numpy()))
        if progbar is not None:
            progbar.update(min(begin + batch_size, len(texts)))
    if not parts:
        return (np.zeros(0, np.int64),) * 4
    values, rows, starts, ends = (np.concatenate(columns) for columns in zip(*parts))
    return values.astype(np.int64), rows, starts, ends


def _share(selected, flag, valid):
    """The fraction of the `valid` positions among `selected` where `flag` is set (0 with none)."""
    selected = selected[valid[selected]]
    return flag[selected].mean() if selected.size else 0.0


def _opening_and_closing(values, rows, token_id, min_count):
    """The positions of `token_id`'s odd (opening) and even (closing) occurrences within each row, or `None`
    when either has fewer than `min_count`."""
    positions = np.flatnonzero(values == token_id)
    if positions.size < 2 * min_count:
        return None
    token_rows = rows[positions]
    group_start = np.r_[0, np.flatnonzero(token_rows[1:] != token_rows[:-1]) + 1]
    group_sizes = np.diff(np.r_[group_start, positions.size])
    rank = np.arange(positions.size) - np.repeat(group_start, group_sizes)
    opening, closing = positions[rank % 2 == 0], positions[rank % 2 == 1]
    if opening.size < min_count or closing.size < min_count:
        return None
    return opening, closing


def learn_attachment(tokenizer, texts, batch_size=1024, punctuation_only=True, min_count=5, verbose=0):
    """Learns a tokenizer's detokenization flags from `texts` by majority vote.

    For every boundary between two neighbouring words of the corpus (character offsets from
    `tokenize_with_offsets`) it records whether a space separated them. Then:

    1. `attach_left`: a token attaches left if it came with no space before it at more than half of its
       word-initial occurrences;
    2. `paired`: a token used as both opening and closing mark (the ASCII `"`) is paired if, counting its
       occurrences within a sentence, the odd ones mostly attach to the next word only and the even ones to
       the previous word only (at least `min_count` of each). The detokenizer then glues by parity;
    3. `attach_right`: a token attaches right if the next word followed it with no space at more than half of
       its word-final occurrences, counting only boundaries not already explained by steps 1-2 (so that `)` in
       "(left)." does not learn to glue the next word just because "." attaches left).

    Args:
        texts: list of Python strings.
        batch_size: sentences per tokenizer call.
        punctuation_only: only punctuation tokens (single characters that the tokenizer splits off on their
            own, plus CJK ideographs) may get a flag. Words never do: a word that mostly ends a sentence
            ("street.") or mostly follows a hyphen ("t-shirt") must not glue itself to its neighbours.
        min_count: occurrences needed of each parity before a token may be `paired`.
        verbose: 0 quiet, 1 a progress bar.

    Returns:
        `(attach_left, attach_right, paired)`: boolean arrays over the vocabulary.
    """
    size = tokenizer.vocab_size
    is_suffix = np.array([token.startswith(SUFFIX_INDICATOR) for token in tokenizer.vocab])
    if punctuation_only:
        candidate = np.array([len(token) == 1 and char_class(token) == SPLIT for token in tokenizer.vocab])
    else:
        candidate = ~is_suffix
    candidate[: len(RESERVED_TOKENS)] = False

    values, rows, starts, ends = _token_offsets(tokenizer, texts, batch_size, verbose)
    # Position i > 0 is a word boundary when i and i - 1 share a row and i starts a word.
    has_previous = np.zeros(values.size, bool)
    has_previous[1:] = rows[1:] == rows[:-1]
    attached_before = np.zeros(values.size, bool)
    attached_before[1:] = starts[1:] == ends[:-1]
    boundary = has_previous & ~is_suffix[values]
    has_next = np.zeros(values.size, bool)
    has_next[:-1] = boundary[1:]
    attached_after = np.zeros(values.size, bool)
    attached_after[:-1] = attached_before[1:]

    def majority(token_ids, votes):
        total = np.bincount(token_ids, minlength=size)
        yes = np.bincount(token_ids, weights=votes.astype(np.float64), minlength=size)
        return candidate & (2 * yes > total)

    attach_left = majority(values[boundary], attached_before[boundary])

    # Paired marks: parity of the occurrence within its row decides opening (odd) or closing (even).
    effective_left = attach_left[values] & boundary
    paired = np.zeros(size, bool)
    for token_id in np.flatnonzero(candidate):
        marks = _opening_and_closing(values, rows, token_id, min_count)
        if marks is None:
            continue
        opening, closing = marks
        if (
            _share(opening, attached_after, has_next) > 0.5
            and _share(opening, attached_before, boundary) <= 0.5
            and _share(closing, attached_before, boundary) > 0.5
            and _share(closing, attached_after, has_next) <= 0.5
        ):
            paired[token_id] = True
            effective_left[closing] = boundary[closing]
            effective_left[opening] = False

    unexplained = boundary & ~effective_left
    previous = np.flatnonzero(unexplained) - 1
    attach_right = majority(values[previous], attached_before[previous + 1])
    attach_left &= ~paired
    attach_right &= ~paired
    return attach_left, attach_right, paired
