"""The shapes a batch decodes in: rows and source columns padded up to a few sizes, so that a compiled decoder sees
few shapes however requests come in (`bucket_rows`, as the exported graph pads), or only a fixed set
(`BatchShapes`, a server's, every one of them compiled at its warm-up)."""

import numpy as np


def bucket_rows(count):
    """The rows a batch of `count` sentences is padded to (1, 2, 4, 8, then multiples of 8), as the exported graph
    pads them: a compiled decoder then sees few batch shapes however requests come in."""
    return count if count <= 2 else 4 if count <= 4 else 8 if count <= 8 else -(-count // 8) * 8


def pad_rows(array, rows):
    """`array` with its first row repeated up to `rows` rows (a repeated row decodes as the first and is dropped)."""
    extra = rows - array.shape[0]
    return array if extra <= 0 else np.concatenate([array, np.repeat(array[:1], extra, axis=0)])


class BatchShapes:
    """A fixed set of batch shapes: `rows` (row counts) and `widths` (source widths), each batch padded to the
    smallest of each that holds it.

    Args:
        rows: the row counts, >= 1. A batch larger than the largest is padded as `bucket_rows` pads it (a new
            shape: give a `batch_size` within the largest).
        widths: the source widths; the largest must hold the model's longest source.
        max_length: the model's longest source, in tokens (padded up to a multiple of 8, as sources are).
    """

    def __init__(self, rows, widths, max_length):
        self.rows, self.widths = tuple(sorted(set(rows))), tuple(sorted(set(widths)))
        longest = -(-int(max_length) // 8) * 8
        if not self.rows or not self.widths or self.rows[0] < 1 or self.widths[-1] < longest:
            raise ValueError(f"fixed shapes need row counts >= 1 and source widths up to at least {longest} (the "
                             f"model's max_length rounded up to 8); got {self.rows} and {self.widths}")


def pad_batch(source_ids, shapes=None):
    """`source_ids` `[B, S]` padded to its shape: rows to `bucket_rows(B)` (`shapes` `None`) or to the smallest of
    `shapes.rows` that holds them (repeated rows, dropped after decoding), columns to the smallest of
    `shapes.widths` (0, the padding id)."""
    count, width = source_ids.shape
    if shapes is None:
        return pad_rows(source_ids, bucket_rows(count))
    rows = next((r for r in shapes.rows if r >= count), bucket_rows(count))
    columns = next(w for w in shapes.widths if w >= width)
    return pad_rows(np.pad(source_ids, ((0, 0), (0, columns - width))), rows)
