"""Streaming corpora: shards (plain and gzip, globs), one checking pass, the tf.data reader, epoch datasets."""

import gzip

import pytest
import tensorflow as tf

from keras_transformer.data.corpus import CorpusError
from keras_transformer.data.pipeline import DataPosition
from keras_transformer.data.pipeline import make_epoch_dataset
from keras_transformer.data.streaming import CorpusScan
from keras_transformer.data.streaming import file_pairs
from keras_transformer.data.streaming import pairs_source
from keras_transformer.data.streaming import resolve_files
from keras_transformer.data.streaming import scan_corpus
from keras_transformer.data.tokenizer import train_tokenizers


def _write(path, lines, compress=False, raw=None):
    data = raw if raw is not None else ("\n".join(lines) + "\n").encode("utf-8")
    path.write_bytes(gzip.compress(data) if compress else data)
    return str(path)


@pytest.fixture
def shards(tmp_path):
    """Two aligned shard pairs, the first gzip-compressed (under a name that does not say so), the second plain."""
    src0 = [f"ein Hund {i}" for i in range(30)] + ["", "  "]
    tgt0 = [f"a dog {i}" for i in range(30)] + ["something", "x"]
    src1 = [f"\ufeffeine Katze {i}\r" for i in range(20)] + [" ".join(["Wort"] * 12)]
    tgt1 = [f"a cat {i}" for i in range(20)] + ["many words"]
    return (
        [_write(tmp_path / "train.de.0", src0, compress=True), _write(tmp_path / "train.de.1", src1)],
        [_write(tmp_path / "train.en.0", tgt0, compress=True), _write(tmp_path / "train.en.1", tgt1)],
    )


def _all_pairs(dataset):
    return [(s.decode(), t.decode()) for s, t in dataset.as_numpy_iterator()]


def test_scan_counts_pairs_and_skips_and_reports_them(shards):
    src, tgt = shards
    scan = scan_corpus(src, tgt, max_words=10)
    assert (scan.pairs, scan.dropped_empty, scan.dropped_long, scan.kept) == (53, 2, 1, 50)
    assert "50 sentence pairs (skipping 3: 2 with an empty side, 1 too long)" in scan.summary()
    # The sample holds clean text: no byte-order mark, no carriage return, no surrounding spaces.
    assert "eine Katze 0" in scan.sample.sources and all(s == s.strip() for s in scan.sample.sources)


def test_the_reader_yields_exactly_the_pairs_the_scan_kept(shards):
    src, tgt = shards
    scan = scan_corpus(src, tgt, max_words=10)
    pairs = _all_pairs(file_pairs(scan.src_files, scan.tgt_files, seed=3, max_words=10))
    assert len(pairs) == scan.kept
    assert sorted(pairs) == sorted(zip(scan.sample.sources, scan.sample.targets))  # sample = all when small
    assert ("eine Katze 7", "a cat 7") in pairs and ("ein Hund 29", "a dog 29") in pairs


def test_the_vocabulary_sample_is_bounded_and_uniform(tmp_path):
    lines = [f"satz {i}" for i in range(5000)]
    src = _write(tmp_path / "s", lines)
    tgt = _write(tmp_path / "t", [f"sentence {i}" for i in range(5000)])
    scan = scan_corpus(src, tgt, sample_size=500, seed=1)
    assert scan.kept == 5000 and len(scan.sample) == 500
    numbers = sorted(int(s.split()[1]) for s in scan.sample.sources)
    assert numbers[0] < 500 and numbers[-1] > 4500  # drawn from the whole file, not its head
    # Aligned: each sampled source keeps its own target.
    assert all(s.split()[1] == t.split()[1] for s, t in zip(scan.sample.sources, scan.sample.targets))
    assert "random sample of 500" in scan.summary()


def test_globs_expand_sorted_and_missing_files_are_named(shards, tmp_path):
    src, _ = shards
    assert resolve_files(str(tmp_path / "train.de.*")) == sorted(src)
    with pytest.raises(CorpusError, match=r"--src: the pattern '.*nothing\.\*' matches no file"):
        resolve_files(str(tmp_path / "nothing.*"))
    with pytest.raises(CorpusError, match=r"--tgt: .*absent: no such file"):
        resolve_files([str(tmp_path / "absent")], flag="--tgt")


def test_mismatched_line_counts_name_the_file_and_line(tmp_path):
    src = [_write(tmp_path / "a.de", ["eins", "zwei", "drei"])]
    tgt = [_write(tmp_path / "a.en", ["one", "two"], compress=True)]
    with pytest.raises(CorpusError, match=r"a\.en:3: file ends after 2 lines, but .*a\.de has more"):
        scan_corpus(src, tgt)
    with pytest.raises(CorpusError, match=r"a\.en:3: file ends after 2 lines, but .*a\.de has more"):
        scan_corpus(tgt, src)  # the short file named whichever side it is


def test_shard_counts_must_match(shards):
    src, tgt = shards
    with pytest.raises(CorpusError, match="--src names 2 files and --tgt 1"):
        scan_corpus(src, tgt[:1])


def test_undecodable_text_names_the_file_line_and_byte(tmp_path):
    src = _write(tmp_path / "bad.de", None, raw=b"gut\nschl\xe9cht\n")
    tgt = _write(tmp_path / "bad.en", ["good", "bad"])
    with pytest.raises(CorpusError, match=r"bad\.de:2: expected UTF-8 text, found the byte 0xe9 at byte 5"):
        scan_corpus(src, tgt)


def test_an_empty_shard_is_an_error(tmp_path):
    src = _write(tmp_path / "e.de", None, raw=b"")
    tgt = _write(tmp_path / "e.en", None, raw=b"")
    with pytest.raises(CorpusError, match=r"e\.de:1: file is empty"):
        scan_corpus(src, tgt)


def test_a_truncated_gzip_shard_is_a_clear_error(tmp_path):
    whole = gzip.compress(("\n".join(f"zeile {i}" for i in range(2000)) + "\n").encode())
    src = _write(tmp_path / "cut.de.gz", None, raw=whole[: len(whole) // 2])
    tgt = _write(tmp_path / "cut.en", [f"line {i}" for i in range(2000)])
    with pytest.raises(CorpusError, match=r"cut\.de\.gz / .*cut\.en: could not read the shard"):
        scan_corpus(src, tgt)


def test_epoch_datasets_change_order_by_epoch_and_resume_at_a_batch(shards):
    src, tgt = shards
    scan = scan_corpus(src, tgt)
    source = pairs_source(scan)
    assert isinstance(scan, CorpusScan) and source.num_pairs == scan.kept
    src_tok, tgt_tok = train_tokenizers(scan.sample, vocab_size=120, verbose=0)
    position = DataPosition()
    dataset = make_epoch_dataset(source.pairs_fn, src_tok, tgt_tok, position=position, seed=5, batch_size=4,
                                 max_length=16, shuffle_buffer=16)

    def epoch(number, skip=0):
        position.set(epoch=number, skip=skip)  # read when the iterator starts, as fit() does each epoch
        return [x["encoder_inputs"].numpy().tolist() for x, _ in dataset]

    first, again, second = epoch(0), epoch(0), epoch(1)
    assert first == again  # an epoch is reproducible from its number
    assert first != second  # and each epoch has its own order
    assert sum(len(batch) for batch in first) == scan.kept
    assert epoch(1, skip=3) == second[3:]  # a resumed epoch continues at the batch it stopped at


def test_process_shards_split_every_global_batch(shards):
    src, tgt = shards
    source = pairs_source(scan_corpus(src, tgt))
    src_tok, tgt_tok = train_tokenizers(source.vocabulary_sample, vocab_size=120, verbose=0)
    common = dict(seed=2, batch_size=6, max_length=16, shuffle_buffer=16)
    whole = list(make_epoch_dataset(source.pairs_fn, src_tok, tgt_tok, **common))
    parts = [list(make_epoch_dataset(source.pairs_fn, src_tok, tgt_tok, shard=(i, 2), **common)) for i in range(2)]
    assert len(parts[0]) == len(parts[1]) == len(whole)
    for batch, half0, half1 in zip(whole, *parts):
        rows = batch[1].shape[0]
        joined = tf.concat([half0[1], half1[1]], axis=0)
        assert joined.shape[0] == rows + rows % 2  # odd batches get one all-padding row (masked out)
        assert joined[:rows].numpy().tolist() == batch[1].numpy().tolist()


def test_lines_of_megabytes_are_skipped_counted_and_streamed_in_bounded_pieces(tmp_path):
    from keras_transformer.data.corpus import MAX_LINE_BYTES

    huge = b"w " * (4 * MAX_LINE_BYTES)  # 8 MiB
    src = _write(tmp_path / "s", None, raw=b"ein Hund\n" + huge + b"\nzwei Katzen\n" + huge, compress=True)
    tgt = _write(tmp_path / "t", ["a dog", "long", "two cats", "longer"], compress=True)
    scan = scan_corpus([src], [tgt])
    assert (scan.pairs, scan.kept, scan.dropped_long, scan.long_lines) == (4, 2, 2, 2)
    assert "2 too long" in scan.summary()
    source = pairs_source(scan)
    assert _all_pairs(source.pairs_fn(0)) == [("ein Hund", "a dog"), ("zwei Katzen", "two cats")]
    assert source.record == {"pairs_read": 4, "skipped_blank_side": 0, "skipped_long_text": 2}
    # The scan's peak memory stays near a few bounded pieces (the file is 16 MiB).
    import tracemalloc

    tracemalloc.start()
    scan_corpus([src], [tgt])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 * MAX_LINE_BYTES
