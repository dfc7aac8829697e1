"""`BaseTranslator`: what every translator has, whatever runs it (a run's model, a SavedModel, a TFLite file,
CTranslate2, a preset), and the helpers the exported translators share."""

import math

from keras_transformer.decoding import arguments


class BaseTranslator:
    """What every translator has, whatever runs it (`keras_transformer.load_translator` returns one): `translate`.

    `translate(texts, beam_size=None, length_penalty=None, batch_size=32, max_length=None, verbose=0,
    source_language=None, target_language=None)` returns a list of strings, one per text, in order; a blank text
    gives `""`.

    - `texts`: Python strings (or UTF-8 bytes).
    - `beam_size`: 1 greedy, more for beam search of that width.
    - `length_penalty`: the length penalty's exponent for beam search (greedy decoding has none).
    - `batch_size`: sentences decoded together (a sentence's translation does not depend on its batch).
    - `max_length`: most output tokens.
    - `verbose`: 0 quiet, 1 a progress bar.
    - `source_language`, `target_language`: a multilingual model's language codes (M2M-100, NLLB-200: `"deu_Latn"`),
      one code or one per text; `None` the model's default (a target language is required where it has none).
      A one-pair model refuses them (`keras_transformer.decoding.languages`).

    `None` for `beam_size`, `length_penalty` or `max_length` means as the artifact decodes by default: a run as its
    `decoding.json` says (else greedy), an export as it was exported. An export whose decoding is fixed in its graph
    raises `ValueError`, naming the argument, for a value it cannot decode with.
    """

    languages = ()  # a multilingual model's language codes; empty for a one-pair model
    decoding = None  # a run's `DecodingSettings` (its `decoding.json`); `None` for an export, which decodes as exported
    default_languages = (None, None)  # its default (source, target) codes, `None` where it has none

    def translate(self, texts, beam_size=None, length_penalty=None, batch_size=32, max_length=None, verbose=0,
                  source_language=None, target_language=None):
        """Translates a list of sentences; returns a list of strings in the same order (see the class)."""
        raise NotImplementedError

    def supports(self, method):
        """Whether this translator answers `method` (`"translate_n_best"`, `"score"`, `"translate_with_prefix"`,
        `"align"`, `"stream"`), rather than refusing it with `ValueError`."""
        own = getattr(type(self), method, None)
        return callable(own) and own is not getattr(BaseTranslator, method, None)

    def _one_pair_only(self, what):
        """Refuses `what` for a multilingual model, whose language choice only `translate` takes."""
        if self.languages:
            raise ValueError(f"{what}: a multilingual model (M2M-100, NLLB-200) takes its languages in `translate` "
                             "only; this method does not choose languages yet")

    def _unsupported(self, what):
        return ValueError(f"{what} needs a run directory, a SavedModel or a CTranslate2 export (see docs/serving.md "
                          f"for which answers what); a {type(self).__name__} does not")

    def translate_n_best(self, texts, n_best, beam_size=None, length_penalty=None, batch_size=32, max_length=None):
        """The `n_best` best translations of each text by beam search, best first: a list (one per text) of
        `(translation, score)` pairs, the score being the beam's (log-probability over the length penalty).

        The beam is `max(beam_size, n_best)` wide; the first pair is what `translate` gives with that beam."""
        raise self._unsupported("n-best translation")

    def score(self, texts, translations, normalize=False, batch_size=32):
        """How likely the model finds each given translation of each text: a list of dicts, one per pair, with
        `score` (the total log-probability of its tokens and the end token; divided by their number when
        `normalize`), `token_scores` (each token's log-probability) and `tokens` (the target tokens, the end token
        last)."""
        raise self._unsupported("scoring")

    def translate_with_prefix(self, texts, prefixes, beam_size=None, length_penalty=None, batch_size=32,
                              max_length=None):
        """Translations that begin with the given target prefixes (one per text; `""` for none): decoding is
        forced through each prefix's tokens, then goes on as `translate` decodes."""
        raise self._unsupported("prefix-constrained translation")

    def align(self, texts, beam_size=None, length_penalty=None, batch_size=32, max_length=None, layer_index=-1):
        """Translations with word alignments: a list of `(translation, pairs)`, `pairs` a list of `(i, j)` (source
        word i, target word j, counting words split at spaces from 0), one pair per target word: the source word
        whose tokens the target word's tokens attend to most, in cross-attention layer `layer_index` averaged
        over its heads (as OpenNMT and Marian report alignments)."""
        raise self._unsupported("word alignment")

    def stream(self, text, max_length=None, sampler=None):
        """A generator of the translation of `text` in pieces, each yielded as soon as its tokens are decided
        (greedy, or a sampler's choice); the pieces join to the translation."""
        raise self._unsupported("streaming")

    def plot_attention(self, text, path, beam_size=None, layer_index=-1):
        """A heat map of the cross-attention for one sentence; only a run's model has one (else `ValueError`)."""
        raise ValueError(f"--plot-attention needs a run directory (the model and its tokenizers); a "
                         f"{type(self).__name__} returns translations only")


def check_fixed_setting(artifact, name, value, fixed, flag):
    """`ValueError` unless `value` is `None` (the artifact's own) or what the artifact decodes with (`fixed`).

    Args:
        artifact: what is decoding (a path), for the message.
        name: the `translate` argument.
        value: the value asked for.
        fixed: the value fixed at export, or `None` when the artifact does not record it.
        flag: the `keras-transformer export` flag that sets it.
    """
    if value is None:
        return
    if fixed is not None and (value == fixed or isinstance(value, float) and math.isclose(value, fixed,
                                                                                          rel_tol=1e-6)):
        return
    exported = f" ({fixed:g})" if fixed is not None else " (not recorded in the file)"
    raise ValueError(f"{name}={value!r}: {artifact} decodes with the {name.replace('_', ' ')} it was exported with"
                     f"{exported}; pass {name}=None, or re-export with `keras-transformer export RUN_DIR {flag} "
                     f"{value}`, or translate the run directory")


def length_batches(lengths, batch_size):
    """Index lists of at most `batch_size` items, shortest first, so that items of similar length go together (the
    sort is stable: equal lengths keep their order). `lengths`: `{index: length}` or a list of lengths."""
    batch_size = arguments.check_positive_int("batch_size", batch_size)
    items = lengths.items() if isinstance(lengths, dict) else enumerate(lengths)
    order = [i for i, _ in sorted(items, key=lambda item: item[1])]
    return [order[begin: begin + batch_size] for begin in range(0, len(order), batch_size)]


def translate_in_batches(texts, batch_size, verbose, translate_batch, columns=()):
    """The one sort-and-batch loop of the translators: `translate_batch(list of UTF-8 bytes, *column chunks) -> list`
    over `texts` sorted by length (`length_batches`), `batch_size` at a time; the results in the order of `texts`.
    `columns`: lists with one value per text (a row's language codes, a prefix, a given translation), cut into the
    same chunks."""
    encoded = [t.encode("utf-8") if isinstance(t, str) else bytes(t) for t in texts]
    for column in columns:
        if len(column) != len(encoded):
            raise ValueError(f"{len(encoded)} texts but {len(column)} values in a list that takes one per text")
    outputs = [""] * len(encoded)
    progress = None
    batches = length_batches([len(t) for t in encoded], batch_size)
    if verbose and len(encoded):
        import keras

        progress = keras.utils.Progbar(len(encoded), unit_name="sentence")
    for chunk in batches:
        for i, text in zip(chunk, translate_batch([encoded[i] for i in chunk],
                                                  *[[column[i] for i in chunk] for column in columns])):
            outputs[i] = text
        if progress is not None:
            progress.add(len(chunk))
    return outputs
