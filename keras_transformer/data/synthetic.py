"""The embedded default corpus: a synthetic "translation" task that needs no download.

English dates written in many ways go to their ISO form, which needs real reordering and word-to-number mapping,
not copying::

    the twenty-third of November, two thousand and twenty-six  ->  2026-11-23
    November 23rd, 2026                                         ->  2026-11-23
    23.11.2026                                                  ->  2026-11-23

A second task spells out numbers ("three hundred and forty-two" -> "342"); `task="mixed"` combines both. The
vocabulary is small (about 100 words) and every source is at most about 16 subword tokens, so a small Transformer
learns it to near-perfect exact match within minutes on a CPU.
"""

import calendar
import datetime
import random

from keras_transformer.data.corpus import ParallelCorpus

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_ORDINAL_ONES = (
    "zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth "
    "fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth"
).split()
_MONTHS = list(calendar.month_name)[1:]
_MONTH_ABBREVIATIONS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sept", "Oct", "Nov", "Dec"]

TASKS = ("dates", "numbers", "mixed")


def number_to_words(number, use_and=True):
    """Spells out `0 <= number < 1_000_000` in British English.

    Args:
        number: the integer.
        use_and: write "and" before the last two digits ("three hundred and five").

    Returns:
        The words, e.g. `"three hundred and forty-two"`.

    Example:

    >>> number_to_words(2026)
    'two thousand and twenty-six'
    """
    if not 0 <= number < 1_000_000:
        raise ValueError(f"number must be in [0, 1000000), got {number}")
    if number < 20:
        return _ONES[number]
    if number < 100:
        tens, ones = divmod(number, 10)
        return _TENS[tens] + ("-" + _ONES[ones] if ones else "")
    if number < 1000:
        hundreds, rest = divmod(number, 100)
        words = _ONES[hundreds] + " hundred"
        if rest:
            words += (" and " if use_and else " ") + number_to_words(rest)
        return words
    thousands, rest = divmod(number, 1000)
    words = number_to_words(thousands, use_and) + " thousand"
    if rest:
        words += (" and " if use_and and rest < 100 else " ") + number_to_words(rest, use_and)
    return words


def ordinal_to_words(number):
    """Spells out an ordinal `1 <= number <= 99`: `23 -> "twenty-third"`."""
    if not 1 <= number <= 99:
        raise ValueError(f"ordinal must be in [1, 99], got {number}")
    if number < 20:
        return _ORDINAL_ONES[number]
    tens, ones = divmod(number, 10)
    if not ones:
        return _TENS[tens][:-1] + "ieth"
    return _TENS[tens] + "-" + _ORDINAL_ONES[ones]


def ordinal_suffix(number):
    """`23 -> "23rd"`, `11 -> "11th"`."""
    if 10 <= number % 100 <= 20:
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def year_to_words(year, rng):
    """Spells out a year the way people say it, picking one of the usual variants at random."""
    if 2000 <= year <= 2009:
        rest = year - 2000
        if not rest:
            return "two thousand"
        return rng.choice(["two thousand and ", "two thousand "]) + number_to_words(rest)
    century, rest = divmod(year, 100)
    if year >= 2010 and rng.random() < 0.5:
        return number_to_words(year)  # "two thousand and twenty-six"
    if rest == 0:
        return number_to_words(century) + " hundred"
    if rest < 10:
        return number_to_words(century) + " oh " + number_to_words(rest)
    return number_to_words(century) + " " + number_to_words(rest)  # "nineteen eighty-four", "twenty twenty-six"


def _date_source(date, rng):
    day, month, year = date.day, date.month, date.year
    name = _MONTHS[month - 1]
    short = _MONTH_ABBREVIATIONS[month - 1]
    template = rng.randrange(8)
    if template == 0:
        return f"the {ordinal_to_words(day)} of {name}, {year_to_words(year, rng)}"
    if template == 1:
        return f"{name} {ordinal_suffix(day)}, {year}"
    if template == 2:
        return f"{day} {name} {year}"
    if template == 3:
        return f"the {ordinal_suffix(day)} of {short} {year}"
    if template == 4:
        return f"{name} the {ordinal_to_words(day)}, {year}"
    if template == 5:
        return f"{ordinal_to_words(day)} {name} {year_to_words(year, rng)}"
    if template == 6:
        return f"{day}.{month}.{year}"
    return f"{short} {day}, {year_to_words(year, rng)}"


def make_date_pair(rng, first_year=1950, last_year=2049):
    """One random `(source, target)` date pair, e.g. `("23 November 2026", "2026-11-23")`."""
    start = datetime.date(first_year, 1, 1).toordinal()
    end = datetime.date(last_year, 12, 31).toordinal()
    date = datetime.date.fromordinal(rng.randint(start, end))
    return _date_source(date, rng), date.isoformat()


def make_number_pair(rng, maximum=9999):
    """One random `(source, target)` number pair, e.g. `("three hundred and forty-two", "342")`."""
    # Favour short numbers a little so that every length is well represented.
    number = rng.randint(0, rng.choice([99, 999, maximum]))
    return number_to_words(number, use_and=rng.random() < 0.8), str(number)


def _make_pair(rng, task):
    if task == "mixed":
        task = "dates" if rng.random() < 0.5 else "numbers"
    if task == "dates":
        return make_date_pair(rng)
    if task == "numbers":
        return make_number_pair(rng)
    raise ValueError(f"task must be one of {TASKS}, got {task!r}")


def make_synthetic_corpus(num_pairs=20000, seed=0, task="dates"):
    """Generates the synthetic parallel corpus, deterministically for a seed.

    Args:
        num_pairs: number of sentence pairs (may contain repeats).
        seed: random seed; the same seed gives the same corpus.
        task: `"dates"` (date phrases -> ISO dates), `"numbers"` (spelled-out numbers -> digits) or `"mixed"`.

    Returns:
        A `ParallelCorpus`.

    Example:

    >>> corpus = make_synthetic_corpus(3, seed=1)
    >>> len(corpus)
    3
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    rng = random.Random(seed)
    pairs = [_make_pair(rng, task) for _ in range(num_pairs)]
    return ParallelCorpus([s for s, _ in pairs], [t for _, t in pairs], name=f"synthetic {task} (seed {seed})")


def make_synthetic_splits(num_train=20000, num_heldout=1000, seed=0, task="dates"):
    """Generates a training corpus and a held-out corpus whose sources never occur in the training part.

    Args:
        num_train: training pairs (distinct sources).
        num_heldout: held-out pairs (distinct sources, none seen in training).
        seed: random seed.
        task: see `make_synthetic_corpus`.

    Returns:
        `(train, heldout)`, two `ParallelCorpus`.

    Example:

    >>> train, heldout = make_synthetic_splits(100, 10, seed=0)
    >>> set(train.sources).isdisjoint(heldout.sources)
    True
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    rng = random.Random(seed)
    wanted = num_train + num_heldout
    seen = {}
    attempts = 0
    while len(seen) < wanted:
        attempts += 1
        if attempts > 20 * wanted + 1000:
            raise ValueError(f"could not generate {wanted} distinct {task} pairs; ask for fewer")
        source, target = _make_pair(rng, task)
        seen.setdefault(source, target)
    pairs = list(seen.items())
    rng.shuffle(pairs)
    train, heldout = pairs[:num_train], pairs[num_train:]
    name = f"synthetic {task} (seed {seed})"
    return (
        ParallelCorpus([s for s, _ in train], [t for _, t in train], name=name),
        ParallelCorpus([s for s, _ in heldout], [t for _, t in heldout], name=f"{name}, held out"),
    )
