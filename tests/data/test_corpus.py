import gzip

import pytest
import tensorflow as tf

from keras_transformer.data import CorpusError
from keras_transformer.data import ParallelCorpus
from keras_transformer.data import corpus_from_dataset
from keras_transformer.data import read_parallel_corpus
from keras_transformer.data import read_tsv_corpus


def write(path, text, compress=False):
    data = text.encode("utf-8") if isinstance(text, str) else text
    if compress:
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


def test_reads_aligned_plain_and_gzip_files(tmp_path):
    src = write(tmp_path / "train.de.gz", "Ein Hund läuft.\nZwei Männer (rechts) gehen.\n", compress=True)
    tgt = write(tmp_path / "train.en", "A dog runs.\r\nTwo men (right) walk.")
    corpus = read_parallel_corpus(src, tgt)
    assert corpus.sources == ["Ein Hund läuft.", "Zwei Männer (rechts) gehen."]
    assert corpus.targets == ["A dog runs.", "Two men (right) walk."]
    assert corpus.dropped == 0
    assert corpus[1] == ("Zwei Männer (rechts) gehen.", "Two men (right) walk.")


def test_empty_and_long_pairs_are_dropped_and_counted(tmp_path):
    src = write(tmp_path / "s.txt", "a b\n   \nc\none two three four\nd\n")
    tgt = write(tmp_path / "t.txt", "x\ny\n\t\nw\nz\n")
    corpus = read_parallel_corpus(src, tgt, max_words=3)
    assert corpus.sources == ["a b", "d"]
    assert corpus.targets == ["x", "z"]
    assert (corpus.dropped_empty, corpus.dropped_long) == (2, 1)
    summary = corpus.summary()
    assert "2 sentence pairs" in summary and "2 with an empty side" in summary and "1 too long" in summary


def test_unicode_line_separators_inside_a_sentence_keep_alignment(tmp_path):
    src = write(tmp_path / "s.txt", "one\u2028still one\x85\nsecond\n")
    tgt = write(tmp_path / "t.txt", "eins\nzwei\n")
    corpus = read_parallel_corpus(src, tgt)
    assert len(corpus) == 2 and corpus.targets[1] == "zwei"


@pytest.mark.parametrize("short_side", ["source", "target"])
def test_mismatched_line_counts_name_the_short_file_and_line(tmp_path, short_side):
    three = "a\nb\nc\n"
    two = "x\ny\n"
    src = write(tmp_path / "s.txt", two if short_side == "source" else three)
    tgt = write(tmp_path / "t.txt", three if short_side == "source" else two)
    with pytest.raises(CorpusError) as error:
        read_parallel_corpus(src, tgt)
    short_file = src if short_side == "source" else tgt
    message = str(error.value)
    assert message.startswith(f"{short_file}:3:")
    assert "2 lines" in message and "3 lines" in message and "expected" in message


def test_invalid_utf8_names_file_and_line(tmp_path):
    src = write(tmp_path / "s.txt", b"fine\nalso fine\nbroken \xff here\n")
    tgt = write(tmp_path / "t.txt", "a\nb\nc\n")
    with pytest.raises(CorpusError, match=r"s\.txt:3: expected UTF-8 text, found the byte 0xff"):
        read_parallel_corpus(src, tgt)


def test_invalid_utf8_inside_gzip_names_file_and_line(tmp_path):
    src = write(tmp_path / "s.gz", b"ok\n\xc3(\n", compress=True)
    tgt = write(tmp_path / "t.txt", "a\nb\n")
    with pytest.raises(CorpusError, match=r"s\.gz:2: expected UTF-8"):
        read_parallel_corpus(src, tgt)


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_empty_file_is_rejected(tmp_path, content):
    src = write(tmp_path / "s.txt", "a\n")
    tgt = write(tmp_path / "t.txt", content)
    with pytest.raises(CorpusError, match=r"t\.txt:1: file is empty"):
        read_parallel_corpus(src, tgt)


def test_corrupt_gzip_is_rejected(tmp_path):
    src = write(tmp_path / "s.gz", gzip.compress(b"a\nb\n")[:-6])
    tgt = write(tmp_path / "t.txt", "a\nb\n")
    with pytest.raises(CorpusError, match=r"s\.gz: expected a valid gzip file"):
        read_parallel_corpus(src, tgt)


def test_read_tsv_corpus(tmp_path):
    path = write(tmp_path / "pairs.tsv", "Hallo\tHello\n\nTschüss\t\t\nJa\tYes\textra\n")
    corpus = read_tsv_corpus(path)
    assert corpus.sources == ["Hallo", "Ja"] and corpus.targets == ["Hello", "Yes"]
    assert corpus.dropped_empty == 2


def test_read_tsv_corpus_rejects_missing_column(tmp_path):
    path = write(tmp_path / "pairs.tsv", "Hallo\tHello\nno tab here\n")
    with pytest.raises(CorpusError, match=r"pairs\.tsv:2: expected at least 2 tab-separated columns, found 1"):
        read_tsv_corpus(path)


def test_corpus_from_dataset_filters_and_counts():
    dataset = tf.data.Dataset.from_tensor_slices((["ein Hund", " ", "drei"], ["a dog", "x", "three"]))
    corpus = corpus_from_dataset(dataset)
    assert corpus.sources == ["ein Hund", "drei"] and corpus.dropped_empty == 1


def test_split_is_deterministic_and_disjoint():
    corpus = ParallelCorpus([f"s{i}" for i in range(20)], [f"t{i}" for i in range(20)])
    rest, held = corpus.split(5, seed=3)
    rest_again, held_again = corpus.split(5, seed=3)
    assert held.sources == held_again.sources and len(held) == 5 and len(rest) == 15
    assert set(rest.sources).isdisjoint(held.sources)
    assert all(s[1:] == t[1:] for s, t in held)


def test_parallel_corpus_rejects_unequal_lists():
    with pytest.raises(CorpusError):
        ParallelCorpus(["a"], [])


def _peak_bytes(function):
    import tracemalloc

    tracemalloc.start()
    try:
        result = function()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("compress", [False, True])
def test_a_line_of_megabytes_is_skipped_and_counted_and_never_read_whole(tmp_path, compress):
    from keras_transformer.data.corpus import MAX_LINE_BYTES
    from keras_transformer.data.corpus import read_lines

    huge = "word " * (8 * MAX_LINE_BYTES // 5)  # 8 MiB with no newline
    src = write(tmp_path / "s.txt", f"ein Hund\n{huge}\nzwei Katzen\n{huge}", compress=compress)
    tgt = write(tmp_path / "t.txt", "a dog\nsomething\ntwo cats\nmore\n", compress=compress)
    corpus, peak = _peak_bytes(lambda: read_parallel_corpus(src, tgt))
    assert corpus.sources == ["ein Hund", "zwei Katzen"] and corpus.targets == ["a dog", "two cats"]
    assert corpus.dropped_long == 2 and "2 too long" in corpus.summary()
    assert peak < 4 * MAX_LINE_BYTES  # the file is 16 MiB
    with pytest.raises(CorpusError, match=r"s.txt:2: line longer than 1,048,576 bytes"):
        read_lines(src)
