"""Reading parallel corpora: two aligned plain-text files, a TSV file, or a `tf.data.Dataset`.

Every reader returns a `ParallelCorpus`: the kept sentence pairs plus how many pairs were dropped and why, so
that the caller can report it. Malformed input raises `CorpusError` with the file, the 1-based line number and
what was expected.
"""

import dataclasses
import gzip
import os
import random
import zlib

MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
MULTI30K_FILES = (
    "train.de.gz",
    "train.en.gz",
    "val.de.gz",
    "val.en.gz",
    "test_2016_flickr.de.gz",
    "test_2016_flickr.en.gz",
)

_GZIP_MAGIC = b"\x1f\x8b"


class CorpusError(ValueError):
    """A corpus file is malformed; the message names the file, the line and what was expected."""


@dataclasses.dataclass
class ParallelCorpus:
    """Aligned source and target sentences, with counts of the pairs dropped while reading.

    Args:
        sources: source sentences, stripped of surrounding whitespace.
        targets: target sentences, `targets[i]` translates `sources[i]`.
        dropped_empty: pairs dropped because one side was blank.
        dropped_long: pairs dropped because one side had more than `max_words` words.
        name: where the pairs came from, used by `summary()`.

    Example:

    >>> corpus = ParallelCorpus(["ein Hund", "eine Katze"], ["a dog", "a cat"])
    >>> len(corpus), corpus[1]
    (2, ('eine Katze', 'a cat'))
    >>> train, heldout = corpus.split(1, seed=0)
    """

    sources: list
    targets: list
    dropped_empty: int = 0
    dropped_long: int = 0
    name: str = "corpus"

    def __post_init__(self):
        if len(self.sources) != len(self.targets):
            raise CorpusError(
                f"{self.name}: expected as many targets as sources, got {len(self.sources)} sources and "
                f"{len(self.targets)} targets"
            )

    def __len__(self):
        return len(self.sources)

    def __getitem__(self, index):
        return self.sources[index], self.targets[index]

    def __iter__(self):
        return iter(zip(self.sources, self.targets))

    @property
    def dropped(self):
        """Total number of dropped pairs."""
        return self.dropped_empty + self.dropped_long

    def summary(self):
        """One line for the user: how many pairs were kept and how many dropped, and why."""
        text = f"{self.name}: {len(self):,} sentence pairs"
        if self.dropped:
            text += (
                f" (dropped {self.dropped:,}: {self.dropped_empty:,} with an empty side, "
                f"{self.dropped_long:,} too long)"
            )
        return text

    def split(self, num_heldout, seed=0):
        """Splits off `num_heldout` random pairs (deterministic for a seed).

        Args:
            num_heldout: number of pairs in the held-out part; a float in (0, 1) is a fraction.
            seed: seed of the shuffle that picks the held-out pairs.

        Returns:
            `(rest, heldout)`, two `ParallelCorpus`; the drop counts stay with `rest`.
        """
        if isinstance(num_heldout, float) and 0.0 < num_heldout < 1.0:
            num_heldout = int(round(num_heldout * len(self)))
        num_heldout = int(num_heldout)
        if not 0 <= num_heldout <= len(self):
            raise ValueError(f"num_heldout must be in [0, {len(self)}], got {num_heldout}")
        order = list(range(len(self)))
        random.Random(seed).shuffle(order)
        held = sorted(order[:num_heldout])
        rest = sorted(order[num_heldout:])
        return (
            ParallelCorpus(
                [self.sources[i] for i in rest],
                [self.targets[i] for i in rest],
                self.dropped_empty,
                self.dropped_long,
                name=self.name,
            ),
            ParallelCorpus(
                [self.sources[i] for i in held],
                [self.targets[i] for i in held],
                name=f"{self.name} (held out)",
            ),
        )

    def to_dataset(self):
        """The pairs as a `tf.data.Dataset` of `(source, target)` scalar `tf.string`."""
        import tensorflow as tf

        return tf.data.Dataset.from_tensor_slices(
            (tf.constant(self.sources, tf.string), tf.constant(self.targets, tf.string))
        )


MAX_LINE_BYTES = 1 << 20  # a line longer than this (1 MiB) is never a sentence: it is skipped, never read whole


def bounded_lines(file, max_line_bytes=MAX_LINE_BYTES):
    """Yields each line of a binary file object with its line end, or `None` for a line over `max_line_bytes`.

    An over-long line is read and dropped in pieces of at most `max_line_bytes`, so that a file with no newline
    for gigabytes never reaches memory whole.

    Example:

    >>> import io
    >>> list(bounded_lines(io.BytesIO(b"short\\n" + b"x" * 20 + b"\\nlast"), max_line_bytes=10))
    [b'short\\n', None, b'last']
    """
    while True:
        line = file.readline(max_line_bytes + 1)
        if not line:
            return
        if len(line) <= max_line_bytes or line.endswith(b"\n"):
            yield line
            continue
        while line and not line.endswith(b"\n"):  # the rest of the over-long line
            line = file.readline(max_line_bytes + 1)
        yield None


def open_text_file(path):
    """A file opened for reading bytes, decompressed when it starts with the gzip magic bytes."""
    with open(path, "rb") as f:
        compressed = f.read(2) == _GZIP_MAGIC
    return gzip.open(path, "rb") if compressed else open(path, "rb")


def _text_line(line, path, number):
    """One raw line (`"\n"` ending included or not) as text: the BOM of the first line and `"\r\n"` removed."""
    if number == 1 and line.startswith(b"\xef\xbb\xbf"):
        line = line[3:]
    line = line[:-1] if line.endswith(b"\n") else line
    return decode_line(line[:-1] if line.endswith(b"\r") else line, path, number)


def _line_list(path, max_line_bytes):
    """The lines of a file as text (BOM and `"\r"` removed), `None` for a line over `max_line_bytes`."""
    lines, text_seen = [], False
    try:
        with open_text_file(path) as f:
            for number, line in enumerate(bounded_lines(f, max_line_bytes), start=1):
                if line is not None:
                    line = _text_line(line, path, number)
                    text_seen = text_seen or bool(line.strip())
                lines.append(line)
    except (OSError, EOFError, zlib.error) as error:
        if isinstance(error, FileNotFoundError):
            raise CorpusError(f"{path}: no such file") from None
        raise CorpusError(f"{path}: expected a valid gzip file, could not decompress it ({error})") from None
    if not text_seen and None not in lines:
        raise CorpusError(f"{path}:1: file is empty; expected one sentence per line")
    return lines


def decode_line(line, path, line_number):
    """One line's bytes as text; a `CorpusError` naming the file, the line and the byte where they are not UTF-8."""
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CorpusError(
            f"{path}:{line_number}: expected UTF-8 text, found the byte 0x{line[error.start]:02x} at byte "
            f"{error.start + 1} of the line that cannot be decoded"
        ) from None


def read_lines(path, max_line_bytes=MAX_LINE_BYTES):
    """Reads a UTF-8 text file (gzip-compressed when it starts with the gzip magic bytes) into lines.

    Lines are split on `"\\n"` only (a trailing `"\\r"` is removed), so that Unicode line separators inside a
    sentence cannot shift the alignment of a parallel corpus. The file is read line by line, each line in bounded
    memory (`bounded_lines`).

    Args:
        path: the file.
        max_line_bytes: the longest line accepted.

    Returns:
        The list of lines, without line ends.

    Raises:
        CorpusError: if the file is empty, not valid gzip, not valid UTF-8 (naming the line) or has a line over
            `max_line_bytes`.
    """
    path = os.fspath(path)
    lines = _line_list(path, max_line_bytes)
    if None in lines:
        raise CorpusError(f"{path}:{lines.index(None) + 1}: line longer than {max_line_bytes:,} bytes; expected "
                          "one sentence per line")
    return lines


def decode_lines(data, name):
    """Splits UTF-8 bytes into lines as `read_lines` does (BOM and `"\\r"` removed, `"\\n"` only).

    Args:
        data: the bytes (a file's, or stdin's).
        name: what to call them in an error (`"<stdin>"`, a path).

    Raises:
        CorpusError: bytes that are not UTF-8, naming `name`, the line and the byte.

    Example:

    >>> decode_lines(b"\\xef\\xbb\\xbfone\\r\\ntwo\\n", "<stdin>")
    ['one', 'two']
    """
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [_text_line(line, name, number) for number, line in enumerate(lines, start=1)]


def _filter_pairs(sources, targets, max_words, name):
    kept_sources, kept_targets = [], []
    dropped_empty = dropped_long = 0
    for source, target in zip(sources, targets):
        if source is None or target is None:  # a line over the reader's bound
            dropped_long += 1
            continue
        source, target = source.strip(), target.strip()
        if not source or not target:
            dropped_empty += 1
        elif max_words is not None and (len(source.split()) > max_words or len(target.split()) > max_words):
            dropped_long += 1
        else:
            kept_sources.append(source)
            kept_targets.append(target)
    return ParallelCorpus(kept_sources, kept_targets, dropped_empty, dropped_long, name=name)


def read_parallel_corpus(src_path, tgt_path, max_words=None):
    """Reads a parallel corpus from two aligned text files, one sentence per line.

    Args:
        src_path: source-language file (UTF-8; `.gz` compressed files are recognised by their content).
        tgt_path: target-language file; line `i` translates line `i` of `src_path`.
        max_words: drop pairs where either side has more whitespace-separated words than this; `None` keeps all.

    Returns:
        A `ParallelCorpus`. Pairs with a blank side are dropped and counted in `dropped_empty`, over-long ones
        (more than `max_words` words, or a line over `MAX_LINE_BYTES`) in `dropped_long`.

    Raises:
        CorpusError: a file is empty, not UTF-8, or the two files have different numbers of lines.

    Example:

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> files = (("train.de", "Ein Hund.\\n\\nZwei Katzen.\\n"), ("train.en", "A dog.\\nNothing.\\nTwo cats.\\n"))
    >>> for name, text in files:
    ...     with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
    ...         _ = f.write(text)
    >>> corpus = read_parallel_corpus(os.path.join(folder, "train.de"), os.path.join(folder, "train.en"))
    >>> list(corpus.sources), corpus.dropped_empty
    (['Ein Hund.', 'Zwei Katzen.'], 1)
    """
    src_path, tgt_path = os.fspath(src_path), os.fspath(tgt_path)
    sources = _line_list(src_path, MAX_LINE_BYTES)
    targets = _line_list(tgt_path, MAX_LINE_BYTES)
    if len(sources) != len(targets):
        if len(targets) < len(sources):
            short_path, short, long_path, long = tgt_path, len(targets), src_path, len(sources)
        else:
            short_path, short, long_path, long = src_path, len(sources), tgt_path, len(targets)
        raise CorpusError(
            f"{short_path}:{short + 1}: file ends after {short:,} lines, but {long_path} has {long:,} lines; "
            "expected the same number of lines in both files (one sentence per line, aligned)"
        )
    name = f"{os.path.basename(src_path)} / {os.path.basename(tgt_path)}"
    return _filter_pairs(sources, targets, max_words, name)


def read_tsv_corpus(path, max_words=None, source_column=0, target_column=1):
    """Reads a parallel corpus from a tab-separated file, one pair per line.

    Args:
        path: the TSV file (UTF-8, `.gz` accepted).
        max_words: drop pairs where either side has more words than this; `None` keeps all.
        source_column: 0-based column of the source sentence.
        target_column: 0-based column of the target sentence.

    Returns:
        A `ParallelCorpus` (blank lines count as empty pairs).

    Raises:
        CorpusError: the file is empty or not UTF-8, or a non-blank line has too few columns.

    Example:

    >>> corpus = read_tsv_corpus("pairs.tsv")  # doctest: +SKIP
    """
    path = os.fspath(path)
    needed = max(source_column, target_column) + 1
    sources, targets = [], []
    for line_number, line in enumerate(_line_list(path, MAX_LINE_BYTES), start=1):
        if line is None:
            sources.append(None)
            targets.append(None)
            continue
        if not line.strip():
            sources.append("")
            targets.append("")
            continue
        columns = line.split("\t")
        if len(columns) < needed:
            raise CorpusError(
                f"{path}:{line_number}: expected at least {needed} tab-separated columns, found {len(columns)}"
            )
        sources.append(columns[source_column])
        targets.append(columns[target_column])
    return _filter_pairs(sources, targets, max_words, os.path.basename(path))


def corpus_from_dataset(dataset, max_words=None, name="dataset"):
    """Collects a `tf.data.Dataset` of `(source, target)` strings into a `ParallelCorpus`.

    Args:
        dataset: yields pairs of scalar `tf.string` (or batches of them: rank-1 pairs are flattened).
        max_words: drop pairs where either side has more words than this.
        name: label used by `summary()`.

    Returns:
        A `ParallelCorpus`.

    Example:

    >>> import tensorflow as tf
    >>> ds = tf.data.Dataset.from_tensor_slices((["ein Hund", ""], ["a dog", "x"]))
    >>> corpus_from_dataset(ds).dropped_empty
    1
    """
    sources, targets = [], []
    for source, target in dataset.as_numpy_iterator():
        if hasattr(source, "shape") and getattr(source, "ndim", 0) > 0:
            sources.extend(s.decode("utf-8") for s in source.reshape(-1))
            targets.extend(t.decode("utf-8") for t in target.reshape(-1))
        else:
            sources.append(source.decode("utf-8"))
            targets.append(target.decode("utf-8"))
    return _filter_pairs(sources, targets, max_words, name)


def as_corpus(data, max_words=None):
    """Returns `data` as a `ParallelCorpus`: a corpus, a `(sources, targets)` pair of lists, or a dataset."""
    if isinstance(data, ParallelCorpus):
        return data
    if isinstance(data, (tuple, list)) and len(data) == 2:
        return _filter_pairs(list(data[0]), list(data[1]), max_words, "corpus")
    if hasattr(data, "as_numpy_iterator"):
        return corpus_from_dataset(data, max_words=max_words)
    raise TypeError(
        "expected a ParallelCorpus, a (sources, targets) pair of lists or a tf.data.Dataset of (source, target) "
        f"strings, got {type(data).__name__}"
    )


def download_multi30k(cache_dir=None):
    """Downloads the Multi30k task-1 raw files (German-English) and returns their directory.

    The six files `train`, `val` and `test_2016_flickr` `.de.gz`/`.en.gz` come from the public multi30k/dataset
    GitHub repository and are cached by `keras.utils.get_file` (under `~/.keras/datasets/multi30k` by default).

    Args:
        cache_dir: root of the cache; `None` uses Keras' default.

    Returns:
        The directory that holds the six `.gz` files.

    Example:

    >>> directory = download_multi30k()  # doctest: +SKIP
    >>> corpus = read_parallel_corpus(f"{directory}/train.de.gz", f"{directory}/train.en.gz")  # doctest: +SKIP
    """
    import keras

    path = None
    for filename in MULTI30K_FILES:
        path = keras.utils.get_file(
            fname=filename, origin=MULTI30K_URL + filename, cache_dir=cache_dir, cache_subdir="multi30k"
        )
    return os.path.dirname(path)
