"""Word alignments from cross-attention: subword tokens mapped back to the words (split at spaces) of their text,
and each target word aligned to the source word its tokens attend to most (as OpenNMT and Marian report them)."""

import numpy as np

# Markers that subword vocabularies put on pieces: WordPiece's continuation prefix, SentencePiece's word start.
_CONTINUATION = "##"
_WORD_START = "\u2581"


def _core(piece):
    if piece.startswith(_CONTINUATION):
        return piece[len(_CONTINUATION):], True
    if piece.startswith(_WORD_START):
        return piece[len(_WORD_START):], False
    return piece, None


def piece_words(text, pieces):
    """For each subword piece of `text`, the index of the word (of `text.split()`) it comes from.

    Each piece's characters are looked up in `text` (case-insensitively) from where the previous piece ended; a
    piece that is not found there (an unknown token, a character the tokenizer normalized) stays in the word of
    the piece before it, or starts the next word if it is marked as a word's start. Returns a list of ints in
    `[0, len(text.split()))` (empty for a text with no words).
    """
    words = text.split()
    if not words:
        return []
    word_of_char = np.full(len(text), -1)
    position = 0
    for index, word in enumerate(words):
        begin = text.index(word, position)
        word_of_char[begin: begin + len(word)] = index
        position = begin + len(word)
    lowered = text.lower()
    result, position, current = [], 0, 0
    for piece in pieces:
        core, continuation = _core(piece)
        found = lowered.find(core.lower(), position) if core else -1
        # Accept a match only near where the last piece ended (spaces, or a character the tokenizer dropped).
        if found >= 0 and len("".join(lowered[position:found].split())) <= 2:
            current = int(word_of_char[found])
            position = found + len(core)
        elif continuation is False and result:
            current = min(current + 1, len(words) - 1)
        result.append(current)
    return result


def align_words(attention, source_words, target_words):
    """`(i, j)` pairs, one per target word j: the source word i with the most attention from j's tokens.

    Args:
        attention: float `[T, S]`: each target token's attention over the source tokens (rows need not sum to 1).
        source_words: length `S`, the source word of each source token (`piece_words`).
        target_words: length `T`, the target word of each target token.
    """
    if not len(target_words) or not len(source_words):
        return []
    attention = np.asarray(attention, dtype=np.float64)[: len(target_words), : len(source_words)]
    num_source = max(source_words) + 1
    by_source = np.zeros((attention.shape[0], num_source))
    np.add.at(by_source.T, np.asarray(source_words), attention.T)  # sum each source word's tokens
    pairs = []
    for j in range(max(target_words) + 1):
        rows = [t for t, w in enumerate(target_words) if w == j]
        if rows:
            pairs.append((int(np.argmax(by_source[rows].sum(axis=0))), j))
    return pairs
