"""Tiny models, reference decoders and scoring shared by the decoding tests."""

import functools

import keras
import numpy as np
from keras import ops

from keras_transformer import build_transformer
from keras_transformer import decoding

START, END = 1, 2

# The decoders' algorithms run eagerly here (many small models and shapes, each of which the compiled default
# would compile anew); test_compiled_defaults.py checks that the default call compiles and gives these tokens.
eager_greedy_decode = functools.partial(decoding.greedy_decode, jit_compile=False)
eager_beam_search = functools.partial(decoding.beam_search, jit_compile=False)
eager_sample_decode = functools.partial(decoding.sample_decode, jit_compile=False)
TINY = dict(num_layers=2, d_model=32, num_heads=4, d_ff=64, dropout=0.0, max_length=32)
VARIANTS = {
    "paper": {},
    "pre-norm-shared-tied": {"norm_first": True, "share_embeddings": True, "tie_output": True},
}


def to_numpy(x):
    return np.asarray(ops.convert_to_numpy(x))


def tiny_model(vocab=40, seed=0, **options):
    """A random-weight model, built once per settings (tests only read it)."""
    return _tiny_model(vocab, seed, tuple(sorted(options.items())))


@functools.lru_cache(maxsize=None)
def _tiny_model(vocab, seed, options):
    keras.utils.set_random_seed(seed)
    return build_transformer(vocab, vocab, **{**TINY, **dict(options)})


def sources(vocab=40, batch=4, length=7, seed=0):
    """Random source ids with ragged padding: row i keeps `length - i` tokens (at least 2)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(3, vocab, (batch, length)).astype("int32")
    for row in range(batch):
        ids[row, max(length - row, 2):] = 0
    return ids


def full_forward_logits(model, encoder_inputs, decoder_inputs):
    """float64 logits of the last decoder position, from a full (uncached) forward pass."""
    logits = to_numpy(model({"encoder_inputs": encoder_inputs, "decoder_inputs": decoder_inputs}))
    return logits[:, -1].astype("float64")


def reference_greedy(model, encoder_inputs, max_length, end_id=END):
    """Greedy decoding by re-running the whole model on the growing prefix (no cache)."""
    batch = encoder_inputs.shape[0]
    prefix = np.full((batch, 1), START, "int32")
    finished = np.zeros(batch, bool)
    out = np.zeros((batch, max_length), "int32")
    for step in range(max_length):
        logits = full_forward_logits(model, encoder_inputs, prefix)
        logits[:, [0, START]] = -np.inf  # padding and the start token are never generated
        chosen = np.where(finished, 0, logits.argmax(-1)).astype("int32")
        out[:, step] = chosen
        finished |= chosen == end_id
        prefix = np.concatenate([prefix, chosen[:, None]], axis=1)
        if finished.all():
            break
    return out


def pad_to(tokens, width):
    tokens = to_numpy(tokens)
    return np.pad(tokens, ((0, 0), (0, width - tokens.shape[1])))


def sequence_log_prob(model, encoder_row, tokens):
    """Summed log-probability of `tokens` (up to its first 0) given one source row, and its length."""
    tokens = [int(t) for t in tokens if t != 0]
    decoder_inputs = np.array([[START] + tokens[:-1]], "int32")
    logits = to_numpy(model({"encoder_inputs": encoder_row[None], "decoder_inputs": decoder_inputs}))[0]
    logits = logits.astype("float64")
    logits[:, [0, START]] = -np.inf
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return float(sum(log_probs[i, t] for i, t in enumerate(tokens))), len(tokens)


def penalized(log_prob, length, alpha):
    return log_prob / ((5.0 + length) / 6.0) ** alpha


def check_padding_after_end(tokens, max_length, end_id=END):
    """Every row: nonzero tokens, then (after `end_id`) only zeros; no row longer than max_length."""
    tokens = to_numpy(tokens)
    assert tokens.shape[1] <= max_length
    for row in tokens:
        nonzero = np.flatnonzero(row == 0)
        length = nonzero[0] if nonzero.size else len(row)
        assert np.all(row[length:] == 0), row
        assert np.all(row[:length] != 0), row
        ends = np.flatnonzero(row[:length] == end_id)
        assert ends.size == 0 or ends[0] == length - 1, row
        if length < len(row):
            assert row[length - 1] == end_id, row


def digit_sources(batch=6, length=5, seed=1):
    """Digit strings (ids 3..11) of ragged lengths 2..length, padded with 0: the reversal task's inputs."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(3, 12, (batch, length)).astype("int32")
    for row, size in enumerate(rng.integers(2, length + 1, batch)):
        ids[row, size:] = 0
    return ids


@functools.lru_cache(maxsize=None)
def trained_reversal_model():
    """A 1+1-layer model trained for a few seconds to reverse digit strings (ids 3..11, end 2)."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    n, length, vocab = 1000, 5, 12
    src = rng.integers(3, vocab, (n, length)).astype("int32")
    lengths = rng.integers(2, length + 1, n)
    dec = np.zeros((n, length + 1), "int32")
    labels = np.zeros((n, length + 1), "int32")
    for i, size in enumerate(lengths):
        src[i, size:] = 0
        reversed_ids = src[i, :size][::-1]
        dec[i, 0], dec[i, 1:size + 1] = START, reversed_ids
        labels[i, :size], labels[i, size] = reversed_ids, END
    model = build_transformer(vocab, vocab, num_layers=1, d_model=32, num_heads=4, d_ff=64, dropout=0.0)
    # `fit()` on whatever the backend is (the helper serves the JAX and PyTorch runs too).
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0))
    model.fit({"encoder_inputs": src, "decoder_inputs": dec}, labels, batch_size=100, epochs=4, shuffle=False,
              verbose=0)
    return model


def trimmed(row):
    """An output row without its trailing padding (what a `SlotEngine` returns)."""
    row = np.asarray(row)
    nonzero = np.flatnonzero(row)
    return row[: nonzero[-1] + 1] if nonzero.size else row[:0]


def mixed_sources(count, seed=0, vocab=40):
    """`count` source rows of 1 to 14 ids (two source buckets of a `SlotEngine`), 0-padded to one width."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 15, count)
    ids = np.zeros((count, lengths.max()), "int32")
    for row, size in enumerate(lengths):
        ids[row, :size] = rng.integers(3, vocab, size)
    return ids


def slot_setting():
    """A tiny model, 48 mixed sources, and an end id (the commonest early token) that ends rows after 1 to 12
    tokens, some never: `(model, sources, end_id)`."""
    import collections

    model = tiny_model()
    src = mixed_sources(48)
    first = to_numpy(eager_greedy_decode(model, src, 4, START, 2))
    end_id = collections.Counter(first[:, 1:].ravel().tolist()).most_common(1)[0][0]
    return model, src, end_id
