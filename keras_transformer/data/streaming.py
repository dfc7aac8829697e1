"""Parallel corpora of any size, read from files as they stream: file lists, one checking pass, `tf.data` pairs.

A corpus is one or more aligned pairs of shard files (plain or gzip, told apart by their content): `--src` shard
`i` translates `--tgt` shard `i`. Nothing here holds the corpus in memory:

* `resolve_files` expands globs and lists into sorted shard lists;
* `scan_corpus` reads every shard pair once, in lockstep, with bounded memory: it counts the pairs, checks that
  both sides have the same number of lines and are UTF-8 (a `CorpusError` names the file and the line), counts the
  pairs that training will skip (a blank side, too many words), and keeps a uniform random sample of the kept pairs
  (reservoir sampling, at most `sample_size`) to learn the vocabulary from;
* `file_pairs` is the `tf.data.Dataset` of `(source, target)` strings of one pass, shards read in parallel and
  interleaved, in a shard order shuffled by a seed tensor (so that each epoch can have its own order).

Line rules (the same in the scan and in the graph): lines end at `"\\n"`; surrounding ASCII whitespace (with a
`"\\r"` of CRLF files) and a UTF-8 byte-order mark are removed; a pair with a blank side is skipped and counted;
with `max_words`, a pair with more whitespace-separated words on either side is skipped and counted; so is a pair
with a line over `MAX_LINE_BYTES`, which is read in bounded pieces, never whole.
"""

import dataclasses
import glob
import itertools
import os
import random

from keras_transformer.data.corpus import CorpusError
from keras_transformer.data.corpus import ParallelCorpus
from keras_transformer.data.corpus import bounded_lines
from keras_transformer.data.corpus import decode_line
from keras_transformer.data.corpus import open_text_file

_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"
_ASCII_SPACE = b" \t\n\r\x0b\x0c"
_GLOB_CHARS = "*?["
_END = object()  # a file that ended before the other


def resolve_files(spec, flag="--src"):
    """Expands a file spec into a sorted list of existing files.

    Args:
        spec: a path, a glob (`"data/train.de.*.gz"`), or a list of paths and globs.
        flag: the setting's name, for error messages.

    Returns:
        The list of files: globs expanded and sorted, plain paths kept in the given order.

    Raises:
        CorpusError: a path does not exist or a glob matches no file.

    Example:

    >>> resolve_files(["train.de.gz"])  # doctest: +SKIP
    ['train.de.gz']
    """
    specs = [spec] if isinstance(spec, (str, os.PathLike)) else list(spec)
    if not specs:
        raise CorpusError(f"{flag}: expected at least one file")
    files = []
    for item in specs:
        item = os.fspath(item)
        if any(char in item for char in _GLOB_CHARS) and not os.path.exists(item):
            matches = sorted(path for path in glob.glob(item) if os.path.isfile(path))
            if not matches:
                raise CorpusError(f"{flag}: the pattern {item!r} matches no file")
            files.extend(matches)
        elif not os.path.isfile(item):
            raise CorpusError(f"{flag}: {item}: no such file")
        else:
            files.append(item)
    return files


def is_gzip(path):
    """Whether a file starts with the gzip magic bytes (the name does not matter)."""
    with open(path, "rb") as f:
        return f.read(2) == _GZIP_MAGIC


def clean_line(line):
    """Bytes of a line as training sees them: without the line end, a byte-order mark or surrounding ASCII spaces."""
    if line.startswith(_BOM):
        line = line[3:]
    return line.strip(_ASCII_SPACE)


@dataclasses.dataclass
class CorpusScan:
    """What one pass over a parallel corpus found (see `scan_corpus`).

    Attributes:
        src_files, tgt_files: the aligned shard files.
        pairs: line pairs read.
        dropped_empty: pairs with a blank side (skipped by training).
        dropped_long: pairs with more than `max_words` words on a side, or a line over `MAX_LINE_BYTES` (skipped).
        sample: a uniform random sample of the kept pairs, at most `sample_size` (a `ParallelCorpus`).
        max_words: the word limit the counts used.
        long_lines: lines over `MAX_LINE_BYTES`: training then reads the files in bounded pieces too.
    """

    src_files: list
    tgt_files: list
    pairs: int
    dropped_empty: int
    dropped_long: int
    sample: ParallelCorpus
    max_words: int | None = None
    long_lines: int = 0

    @property
    def kept(self):
        """Pairs that training reads in each epoch."""
        return self.pairs - self.dropped_empty - self.dropped_long

    @property
    def name(self):
        def label(files):
            return os.path.basename(files[0]) + (f" (+{len(files) - 1} shards)" if len(files) > 1 else "")

        return f"{label(self.src_files)} / {label(self.tgt_files)}"

    def summary(self):
        """One line for the user: pairs kept and skipped, and why."""
        text = f"{self.name}: {self.kept:,} sentence pairs"
        if self.dropped_empty or self.dropped_long:
            text += (f" (skipping {self.dropped_empty + self.dropped_long:,}: {self.dropped_empty:,} with an empty "
                     f"side, {self.dropped_long:,} too long)")
        if len(self.sample) < self.kept:
            text += f"; vocabulary learned from a random sample of {len(self.sample):,}"
        return text


def scan_corpus(src, tgt, sample_size=200_000, max_words=None, seed=0, verbose=0):
    """Reads a parallel corpus once, checking it and sampling it, in memory bounded by `sample_size`.

    Args:
        src: source shard file(s): a path, a glob or a list (see `resolve_files`).
        tgt: target shard file(s), as many as `src`; shard `i` of each side are aligned line by line.
        sample_size: the most pairs kept for learning the vocabulary (a uniform random sample of the kept pairs).
        max_words: count pairs with more whitespace-separated words on a side as skipped; `None` keeps all.
        seed: seed of the sample.
        verbose: 1 shows a progress line while reading.

    Returns:
        A `CorpusScan`.

    Raises:
        CorpusError: a file is missing, empty, not valid gzip or UTF-8, or the two sides of a shard have different
            numbers of lines; the message names the file and the line.

    Example:

    >>> scan = scan_corpus("train.de.gz", "train.en.gz", sample_size=50_000)  # doctest: +SKIP
    >>> print(scan.summary())  # doctest: +SKIP
    train.de.gz / train.en.gz: 29,000 sentence pairs
    """
    src_files = resolve_files(src, "--src")
    tgt_files = resolve_files(tgt, "--tgt")
    if len(src_files) != len(tgt_files):
        raise CorpusError(
            f"--src names {len(src_files)} files and --tgt {len(tgt_files)}; expected aligned shards, as many "
            "on each side (shard i of --src translates shard i of --tgt)"
        )
    if sample_size < 1:
        raise ValueError(f"sample_size must be at least 1, got {sample_size}")
    sample = _Reservoir(sample_size, seed)
    pairs = dropped_empty = dropped_long = long_lines = 0
    progbar = None
    if verbose:
        import keras

        progbar = keras.utils.Progbar(None, unit_name="pair")
    for src_path, tgt_path in zip(src_files, tgt_files):
        shard_lines = 0
        try:
            for shard_lines, source, target in _aligned_lines(src_path, tgt_path):
                if source is None or target is None:  # a line over MAX_LINE_BYTES, never read whole
                    long_lines += (source is None) + (target is None)
                    dropped_long += 1
                    continue
                source, target = clean_line(source), clean_line(target)
                text_source = decode_line(source, src_path, shard_lines)
                text_target = decode_line(target, tgt_path, shard_lines)
                if not source or not target:
                    dropped_empty += 1
                elif max_words is not None and (len(source.split()) > max_words or len(target.split()) > max_words):
                    dropped_long += 1
                else:
                    sample.add(text_source, text_target)
                if progbar is not None and shard_lines % 100_000 == 0:
                    progbar.update(pairs + shard_lines)
        except (OSError, EOFError) as error:
            if isinstance(error, FileNotFoundError):
                raise CorpusError(f"{error.filename}: no such file") from None
            raise CorpusError(f"{src_path} / {tgt_path}: could not read the shard ({error})") from None
        if shard_lines == 0:
            raise CorpusError(f"{src_path}:1: file is empty; expected one sentence per line")
        pairs += shard_lines
    if progbar is not None:
        progbar.update(pairs, finalize=True)
    if not sample.seen:
        raise CorpusError(f"{src_files[0]}: no sentence pair with text on both sides")
    corpus = ParallelCorpus(sample.sources, sample.targets, name=f"sample of {sample.seen:,} pairs")
    return CorpusScan(src_files, tgt_files, pairs, dropped_empty, dropped_long, corpus, max_words, long_lines)


def _aligned_lines(src_path, tgt_path):
    """`(line number, source, target)` of one shard, as bytes (`None`: a line over `MAX_LINE_BYTES`, never read
    whole); a `CorpusError` names the file that ends first."""
    with open_text_file(src_path) as fs, open_text_file(tgt_path) as ft:
        lines = itertools.zip_longest(bounded_lines(fs), bounded_lines(ft), fillvalue=_END)
        for number, (source, target) in enumerate(lines, 1):
            if source is _END or target is _END:
                short, long_ = (src_path, tgt_path) if source is _END else (tgt_path, src_path)
                raise CorpusError(
                    f"{short}:{number}: file ends after {number - 1:,} lines, but {long_} has "
                    "more; expected the same number of lines in both files (one sentence per line, aligned)"
                )
            yield number, source, target


class _Reservoir:
    """A uniform random sample of at most `size` pairs of a stream of unknown length (reservoir sampling)."""

    def __init__(self, size, seed):
        self.size, self.rng = size, random.Random(seed)
        self.sources, self.targets, self.seen = [], [], 0

    def add(self, source, target):
        if self.seen < self.size:
            self.sources.append(source)
            self.targets.append(target)
        else:
            slot = self.rng.randrange(self.seen + 1)
            if slot < self.size:
                self.sources[slot], self.targets[slot] = source, target
        self.seen += 1


def file_pairs(src_files, tgt_files, seed=None, parallel_reads=8, max_words=None, bounded=False):
    """One pass over aligned shard files as a `tf.data.Dataset` of `(source, target)` scalar strings.

    Shards are read `parallel_reads` at a time and interleaved; with `seed` (a Python int or an int64 tensor) the
    shard order is shuffled by it. Lines are cleaned as `clean_line` does; pairs with a blank side, or more than
    `max_words` words on a side, are skipped (as `scan_corpus` counts them). With `bounded` (what a scan that
    found lines over `MAX_LINE_BYTES` asks for), lines are read in bounded pieces by Python and such pairs are
    skipped; otherwise by `tf.data.TextLineDataset`, faster, which holds one whole line at a time.

    Example:

    >>> pairs = file_pairs(["train.de.gz"], ["train.en.gz"])  # doctest: +SKIP
    """
    import tensorflow as tf

    compression = ["GZIP" if is_gzip(path) else "" for path in list(src_files) + list(tgt_files)]
    count = len(src_files)
    columns = (list(src_files), list(tgt_files), compression[:count], compression[count:])
    shards = tf.data.Dataset.from_tensor_slices(columns)
    if seed is not None and count > 1:
        order = tf.random.experimental.stateless_shuffle(tf.range(count), seed=tf.stack([tf.cast(seed, tf.int64), -1]))
        shards = tf.data.Dataset.range(count).map(
            lambda index: tuple(tf.gather(tf.constant(column), order[index]) for column in columns))

    def read_shard(src_path, tgt_path, src_compression, tgt_compression):
        if bounded:
            return tf.data.Dataset.from_generator(_bounded_pairs, args=(src_path, tgt_path),
                                                  output_signature=(tf.TensorSpec((), tf.string),) * 2)
        return tf.data.Dataset.zip(
            tf.data.TextLineDataset(src_path, src_compression), tf.data.TextLineDataset(tgt_path, tgt_compression)
        )

    if count > 1:
        pairs = shards.interleave(read_shard, cycle_length=min(count, parallel_reads), block_length=16,
                                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    else:
        pairs = shards.flat_map(read_shard)
    return filter_pairs(pairs.map(lambda s, t: (_clean(s), _clean(t))), max_words=max_words)


def _bounded_pairs(src_path, tgt_path):
    """The line pairs of one shard, read in bounded memory; a pair with a line over `MAX_LINE_BYTES` is blank."""
    with open_text_file(src_path.decode()) as fs, open_text_file(tgt_path.decode()) as ft:
        for source, target in zip(bounded_lines(fs), bounded_lines(ft)):
            yield (b"", b"") if source is None or target is None else (source, target)


def _clean(line):
    import tensorflow as tf

    return tf.strings.strip(tf.strings.regex_replace(line, "^\ufeff", ""))


def filter_pairs(pairs, max_words=None):
    """Skips pairs with a blank side (and, with `max_words`, over-long ones) in a dataset of string pairs."""
    import tensorflow as tf

    def keep(source, target):
        ok = tf.logical_and(tf.strings.length(source) > 0, tf.strings.length(target) > 0)
        if max_words is not None:
            ok = tf.logical_and(ok, tf.logical_and(tf.size(tf.strings.split(source)) <= max_words,
                                                   tf.size(tf.strings.split(target)) <= max_words))
        return ok

    return pairs.filter(keep)


@dataclasses.dataclass
class PairsSource:
    """Training pairs as the trainer consumes them: one pass as a dataset, and a bounded sample for the vocabulary.

    Attributes:
        pairs_fn: `pairs_fn(seed)` -> a `tf.data.Dataset` of one pass of `(source, target)` strings.
        vocabulary_sample: a `ParallelCorpus` to learn the vocabulary from.
        num_pairs: pairs in one pass.
        summary: one line for the user.
        record: the pairs read and those skipped while reading, for the run's record.
    """

    pairs_fn: object
    vocabulary_sample: ParallelCorpus
    num_pairs: int
    summary: str
    record: dict = dataclasses.field(default_factory=dict)


def _record(read, blank, long):
    return {"pairs_read": read, "skipped_blank_side": blank, "skipped_long_text": long}


def pairs_source(data, max_words=None, sample_size=200_000, seed=0, verbose=0):
    """A `PairsSource` for training data: a `CorpusScan` (files, streamed) or anything `as_corpus` accepts (memory).

    Example:

    >>> source = pairs_source((["ein Hund", "eine Katze"], ["a dog", "a cat"]))
    >>> source.num_pairs, source.summary
    (2, 'corpus: 2 sentence pairs')
    """
    if isinstance(data, CorpusScan):
        src_files, tgt_files, scan_max_words, bounded = data.src_files, data.tgt_files, data.max_words, data.long_lines

        def from_files(epoch_seed):  # holds the file names only: the sample can be freed once the vocabulary is learned
            return file_pairs(src_files, tgt_files, seed=epoch_seed, max_words=scan_max_words, bounded=bool(bounded))

        return PairsSource(from_files, data.sample, data.kept, data.summary(),
                           _record(data.pairs, data.dropped_empty, data.dropped_long))
    from keras_transformer.data.corpus import as_corpus

    corpus = as_corpus(data, max_words=max_words)
    if not len(corpus):
        raise CorpusError(f"{corpus.name}: no sentence pairs to train on")
    pairs = corpus.to_dataset()
    sample = corpus
    if len(corpus) > sample_size:
        sample = corpus.split(len(corpus) - sample_size, seed=seed)[0]
    return PairsSource(lambda epoch_seed: pairs, sample, len(corpus), corpus.summary(),
                       _record(len(corpus) + corpus.dropped, corpus.dropped_empty, corpus.dropped_long))
