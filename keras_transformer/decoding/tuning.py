"""Choosing the beam size and length penalty on a held-out set (never the test set).

`search_decoding` translates the held-out sources once per (beam size, length penalty) of a grid, scores each
with sacreBLEU (cased, detokenized, 13a; chrF beside it) and returns every row and the best one as a
`DecodingSearch`. A run directory keeps the choice (`runs.run.write_decoding_settings`: `decoding.json`), and
`translate`, `evaluate` and `export` decode with it by default. `keras-transformer tune` is the command line.

The default grid is GNMT's length-penalty range (Wu et al., 2016, tuned alpha in [0, 1]) extended to 2, with
the paper's beam 4. The length penalty is GNMT's, or transformers' rule (`length_penalty_rule`, see `beam_search`),
fixed for a search and kept with its choice.
"""

import dataclasses
import time

from keras_transformer.decoding.beam_search import DEFAULT_LENGTH_PENALTY_RULE
from keras_transformer.decoding.beam_search import check_length_penalty_rule

DEFAULT_LENGTH_PENALTIES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.5, 2.0)
DEFAULT_BEAM_SIZES = (4,)


@dataclasses.dataclass(frozen=True)
class DecodingSettings:
    """A decoding choice and where it came from (what `decoding.json` holds).

    Example:

    >>> settings = DecodingSettings(beam_size=4, length_penalty=1.0, bleu=41.2, chrf=60.1, sentences=1014,
    ...                             tuned_on="val.de.gz / val.en.gz")
    >>> DecodingSettings.from_dict(settings.to_dict()) == settings
    True
    >>> settings.describe()
    'beam 4, length penalty 1 (tuned on val.de.gz / val.en.gz: BLEU 41.20)'
    >>> DecodingSettings(beam_size=4, length_penalty=1.0, length_penalty_rule="transformers").describe()
    'beam 4, length penalty 1 (transformers rule)'
    """

    beam_size: int
    length_penalty: float
    bleu: float | None = None
    chrf: float | None = None
    sentences: int | None = None
    tuned_on: str | None = None
    grid: tuple = ()
    length_penalty_rule: str = DEFAULT_LENGTH_PENALTY_RULE
    max_length: int | None = None  # most output tokens (else the model's); an imported checkpoint's own limit
    force_end: bool = False  # a row that reaches max_length ends there (transformers' forced_eos_token_id)

    def to_dict(self):
        values = dataclasses.asdict(self)
        values["grid"] = [dict(row) for row in self.grid]
        return values

    @classmethod
    def from_dict(cls, values):
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown decoding settings {unknown}; known: {sorted(known)}")
        values = dict(values)
        values["grid"] = tuple(dict(row) for row in values.get("grid", ()))
        settings = cls(**values)
        _check_beam_size(settings.beam_size)
        _check_length_penalty(settings.length_penalty)
        check_length_penalty_rule(settings.length_penalty_rule)
        if settings.max_length is not None and (not isinstance(settings.max_length, int)
                                                or isinstance(settings.max_length, bool) or settings.max_length < 1):
            raise ValueError(f"max_length = {settings.max_length!r}: must be an integer >= 1 or null")
        if not isinstance(settings.force_end, bool):
            raise ValueError(f"force_end = {settings.force_end!r}: must be true or false")
        return settings

    def describe(self):
        text = f"beam {self.beam_size}, length penalty {self.length_penalty:g}"
        if self.length_penalty_rule != DEFAULT_LENGTH_PENALTY_RULE:
            text += f" ({self.length_penalty_rule} rule)"
        if self.max_length is not None:
            text += f", at most {self.max_length} tokens" + (" (the last one forced to end)" if self.force_end else "")
        if self.tuned_on:
            text += f" (tuned on {self.tuned_on}" + (f": BLEU {self.bleu:.2f})" if self.bleu is not None else ")")
        return text


@dataclasses.dataclass(frozen=True)
class DecodingSearch:
    """What `search_decoding` measured: one row per grid point, in grid order, and the best of them."""

    rows: tuple
    best: DecodingSettings

    def table(self):
        """The rows as text, one line each, the chosen one marked."""
        lines = [f"{'beam':>4}  {'length penalty':>14}  {'BLEU':>6}  {'chrF':>6}  {'seconds':>7}"]
        for row in self.rows:
            chosen = (row["beam_size"], row["length_penalty"]) == (self.best.beam_size, self.best.length_penalty)
            lines.append(f"{row['beam_size']:>4}  {row['length_penalty']:>14g}  {row['bleu']:>6.2f}  "
                         f"{row['chrf']:>6.2f}  {row['seconds']:>7.1f}" + ("  <- chosen" if chosen else ""))
        return "\n".join(lines)


def search_decoding(translate, sources, references, beam_sizes=DEFAULT_BEAM_SIZES,
                    length_penalties=DEFAULT_LENGTH_PENALTIES, tuned_on=None, on_row=None,
                    length_penalty_rule=DEFAULT_LENGTH_PENALTY_RULE):
    """Scores every (beam size, length penalty) of a grid on held-out pairs; the best by BLEU wins.

    Args:
        translate: `translate(sources, beam_size, length_penalty)` -> a list of translations (e.g. a
            `Translator.translate` with those keywords).
        sources: the held-out sources (a list of strings, at least one).
        references: their reference translations (a list of strings, as long as `sources`).
        beam_sizes: widths to try (ints >= 1; width 1 is greedy, where the length penalty does not apply, so it
            is tried once).
        length_penalties: GNMT alphas to try (floats >= 0).
        tuned_on: a description of the held-out set, kept with the result.
        on_row: called with each row dict as it is measured (progress).
        length_penalty_rule: the rule `translate` scores hypotheses with (`"gnmt"` or `"transformers"`, see
            `beam_search`), kept with the result; `translate` applies it.

    Returns:
        A `DecodingSearch`. Ties go to the earlier grid point (smaller beam, then the grid's order of alphas).

    Example:

    >>> def translate(sources, beam_size, length_penalty):  # longer outputs with a larger alpha
    ...     return [" ".join(["a", "dog"] + ["runs"] * int(length_penalty)) for _ in sources]
    >>> search = search_decoding(translate, ["x", "y"], ["a dog runs", "a dog runs"], beam_sizes=[2],
    ...                          length_penalties=[0.0, 1.0, 2.0])
    >>> search.best.length_penalty, round(search.best.bleu, 1)
    (1.0, 100.0)
    """
    from keras_transformer.scoring import corpus_scores

    sources, references = list(sources), list(references)
    if not sources:
        raise ValueError("search_decoding needs at least one held-out pair")
    if len(sources) != len(references):
        raise ValueError(f"search_decoding: {len(sources)} sources but {len(references)} references")
    beam_sizes = [_check_beam_size(b) for b in beam_sizes]
    length_penalties = [_check_length_penalty(a) for a in length_penalties]
    length_penalty_rule = check_length_penalty_rule(length_penalty_rule)
    if not beam_sizes or not length_penalties:
        raise ValueError("search_decoding needs at least one beam size and one length penalty")
    grid = []
    for beam_size in dict.fromkeys(beam_sizes):
        alphas = [0.0] if beam_size == 1 else list(dict.fromkeys(length_penalties))
        grid.extend((beam_size, alpha) for alpha in alphas)
    rows = []
    for beam_size, alpha in grid:
        start = time.perf_counter()
        hypotheses = translate(sources, beam_size=beam_size, length_penalty=alpha)
        seconds = time.perf_counter() - start
        scores = corpus_scores(hypotheses, references)
        row = {"beam_size": beam_size, "length_penalty": alpha, "bleu": scores["bleu"], "chrf": scores["chrf"],
               "seconds": round(seconds, 2)}
        rows.append(row)
        if on_row is not None:
            on_row(row)
    best = max(rows, key=lambda row: row["bleu"])  # max keeps the first of equal scores
    settings = DecodingSettings(beam_size=best["beam_size"], length_penalty=best["length_penalty"],
                                bleu=round(best["bleu"], 4), chrf=round(best["chrf"], 4), sentences=len(sources),
                                tuned_on=tuned_on, grid=tuple(rows), length_penalty_rule=length_penalty_rule)
    return DecodingSearch(rows=tuple(rows), best=settings)


MAX_BEAMS = 16  # the widest beam a checkpoint's or a preset's generation settings may ask for (import refuses more)

def _check_beam_size(value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"beam size must be an integer >= 1, got {value!r}")
    return value


def _check_length_penalty(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 10.0:
        raise ValueError(f"length penalty must be a number in [0, 10], got {value!r}")
    return float(value)
