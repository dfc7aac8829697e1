"""Marian's `vocab.json` (token -> id) read with errors that name the file and line, and permuted into our id
convention (`permute_vocabulary`: padding 0, unknown 1, start 2, end 3, then the checkpoint's other tokens in its
order; M2M-100 and NLLB vocabularies take the same permutation).
"""

import json

import numpy as np


def read_json(path, expected):
    with open(path, "rb") as f:
        data = f.read()
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(f"{path}:{line}: expected UTF-8 JSON ({expected}), found the byte "
                         f"0x{data[error.start]:02x} (damaged?)") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{error.lineno}: expected JSON ({expected}): {error.msg}") from None


def read_vocab_json(path):
    vocab = read_json(path, "an object of token -> id")
    if not isinstance(vocab, dict):
        raise ValueError(f"{path}:1: expected a JSON object of token -> id, found a {type(vocab).__name__}")
    try:
        vocab_in_id_order(vocab)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    return vocab


def vocab_in_id_order(vocab):
    """The tokens of a token -> id mapping, by id; the ids must be `0 .. len - 1`, each once."""
    tokens = [None] * len(vocab)
    for token, i in vocab.items():
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(vocab):
            raise ValueError(f"expected token ids 0 .. {len(vocab) - 1}, found {token!r}: {i!r}")
        if tokens[i] is not None:
            raise ValueError(f"expected each id once, found {i} for {tokens[i]!r} and {token!r}")
        tokens[i] = token
    return tokens


def permute_vocabulary(original_vocab, pad_token, unk_token, eos_token, start_token, decoder_start_token=None):
    """Our vocabulary from a checkpoint's mapping of token -> checkpoint id (Marian's `vocab.json`).

    Ours is `[pad, unk, start, eos]` then the checkpoint's other tokens in its id order: one token more than the
    checkpoint's (`start_token`, which it lacks). `start_token` takes the row of `decoder_start_token`, the token the
    checkpoint's decoder starts from: `pad_token` when `None` (Marian), `eos_token` for M2M-100 and NLLB.

    Returns:
        `(vocab, original_vocab, original_ids, ids_from_original)`: our tokens and the checkpoint's (tuples, by id),
        the checkpoint id behind each of our ids (int32; `start` and `decoder_start_token` share one), and ours for
        each checkpoint id (never the start token: `decoder_start_token`'s id maps to that token's own id).

    Raises:
        ValueError: a special token missing, `start_token` already there, or special tokens that coincide.
    """
    original = vocab_in_id_order(original_vocab)
    decoder_start_token = pad_token if decoder_start_token is None else decoder_start_token
    for name, token in (("pad_token", pad_token), ("unk_token", unk_token), ("eos_token", eos_token),
                        ("decoder_start_token", decoder_start_token)):
        if token not in original_vocab:
            raise ValueError(f"the vocabulary has no {name} {token!r}")
    if start_token in original_vocab:
        raise ValueError(f"the vocabulary already has {start_token!r}, the start token this tokenizer adds")
    specials = (pad_token, unk_token, eos_token)
    if len(set(specials)) != 3:
        raise ValueError(f"pad_token, unk_token and eos_token must differ, got {specials}")
    vocab = tuple([pad_token, unk_token, start_token, eos_token] + [t for t in original if t not in specials])
    start = original_vocab[decoder_start_token]
    original_ids = np.array([original_vocab[pad_token], original_vocab[unk_token], start, original_vocab[eos_token]]
                            + [original_vocab[token] for token in vocab[4:]], dtype=np.int32)
    ids_from_original = np.zeros(len(original), dtype=np.int32)
    ids_from_original[original_ids] = np.arange(len(vocab), dtype=np.int32)
    ids_from_original[start] = vocab.index(decoder_start_token)  # its own id, not the start token's
    return vocab, tuple(original), original_ids, ids_from_original
