"""Words as FastWordpiece's end-to-end mode sees them: which characters are spaces, punctuation or word
characters, how a text splits into words, which words may enter a vocabulary, and word counts.

`split_words` reproduces tensorflow-text's word splitting in Python so that a learned vocabulary fits what the
tokenizer sees (checked against tensorflow-text 2.21).
"""

import collections
import unicodedata

import keras

# Whitespace as FastWordpiece's end-to-end pre-tokenizer sees it (checked code point by code point against
# tensorflow-text 2.21: ASCII \t\n\v\f\r and space, U+0085, and the Unicode Zs/Zl/Zp categories).
_EXTRA_WHITESPACE = frozenset("\t\n\x0b\x0c\r \x85")
# CJK ideographs are split one per word, like punctuation (the BERT convention).
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

WORD, SPACE, SPLIT = 0, 1, 2
_char_class_cache = {}


def char_class(char):
    """`WORD`, `SPACE` or `SPLIT` (punctuation and CJK ideographs: a word of their own)."""
    kind = _char_class_cache.get(char)
    if kind is None:
        code = ord(char)
        category = unicodedata.category(char)
        if char in _EXTRA_WHITESPACE or category in ("Zs", "Zl", "Zp"):
            kind = SPACE
        elif (
            33 <= code <= 47
            or 58 <= code <= 64
            or 91 <= code <= 96
            or 123 <= code <= 126
            or category.startswith("P")
            or any(low <= code <= high for low, high in _CJK_RANGES)
        ):
            kind = SPLIT
        else:
            kind = WORD
        _char_class_cache[char] = kind
    return kind


def is_learnable(word):
    """Whether a word may give vocabulary pieces: not if it holds a control character (NUL and the other Unicode
    `Cc` ones that are not whitespace), a surrogate or a byte-order mark. Such words are left out of learning and
    tokenize as `[UNK]`, in training and translation alike (FastWordpiece cannot hold a NUL in its vocabulary)."""
    return not any(unicodedata.category(c) in ("Cc", "Cs") or c == "\ufeff" for c in word)


def is_blank(text):
    """Whether `text` holds no word for FastWordpiece: whitespace as it sees it only (Python's `str.strip` also
    removes U+001C..U+001F, which FastWordpiece keeps as word characters)."""
    return all(char_class(c) == SPACE for c in text)


def split_words(text):
    """Splits text into words exactly as FastWordpiece's end-to-end mode does before cutting pieces.

    Whitespace separates words and is dropped; every punctuation character (ASCII punctuation and symbols, Unicode
    `P*`) and CJK ideograph is a word of its own. Control characters (NUL, ...) are word characters here, as for
    FastWordpiece; `count_words` leaves words holding them out of the vocabulary.

    Args:
        text: a Python string.

    Returns:
        The list of words.

    Example:

    >>> split_words("A man, in a t-shirt.")
    ['A', 'man', ',', 'in', 'a', 't', '-', 'shirt', '.']
    """
    words = []
    current = []
    for char in text:
        kind = char_class(char)
        if kind == WORD:
            current.append(char)
            continue
        if current:
            words.append("".join(current))
            current = []
        if kind == SPLIT:
            words.append(char)
    if current:
        words.append("".join(current))
    return words


def count_words(texts, verbose=1):
    """Counts the words of `texts` as split by `split_words`, with a progress bar.

    Args:
        texts: an iterable of Python strings (or bytes, decoded as UTF-8).
        verbose: 0 quiet, 1 a `keras.utils.Progbar`.

    Returns:
        A `collections.Counter` from word to count.

    Example:

    >>> count_words(["a cat.", "a dog."], verbose=0)["a"]
    2
    """
    total = len(texts) if hasattr(texts, "__len__") else None
    progbar = keras.utils.Progbar(total, verbose=verbose, unit_name="line") if verbose else None
    # Whole lines are split once per distinct chunk between spaces: far fewer distinct chunks than characters.
    chunk_counts = collections.Counter()
    seen = 0
    for text in texts:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        chunk_counts.update(text.split(" "))
        seen += 1
        if progbar is not None and seen % 2000 == 0:
            progbar.update(seen)
    counts = collections.Counter()
    for chunk, count in chunk_counts.items():
        for word in split_words(chunk):
            if is_learnable(word):
                counts[word] += count
    if progbar is not None:
        progbar.update(seen, finalize=True)
    return counts
