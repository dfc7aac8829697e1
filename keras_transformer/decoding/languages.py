"""The language choice of a multilingual model (M2M-100, NLLB-200): the source language's code starts the source
(`[source language] X </s>`), and the target language's code is the first generated token, forced (transformers'
`forced_bos_token_id`), then dropped from the text. Every row of a batch has its own pair, so sentences into
different languages decode together.

A tokenizer is multilingual when it has `languages` (its codes) and `language_id(code)`
(`keras_transformer.data.multilingual_tokenizer.MultilingualTokenizer`); any other model translates one language
pair and refuses a language argument.
"""

import numpy as np

from keras_transformer.data.packing import pack_rows
from keras_transformer.decoding.base_translator import length_batches


def is_multilingual(tokenizer):
    """Whether `tokenizer` holds language codes to choose from."""
    return bool(getattr(tokenizer, "languages", None))


def check_languages(source_tokenizer, target_tokenizer, source_language, target_language):
    """Refuses a language argument for a one-pair model (tokenizers without language codes), in one line."""
    if not is_multilingual(target_tokenizer) and (source_language is not None or target_language is not None):
        given = "source_language" if source_language is not None else "target_language"
        raise ValueError(f"{given}: this model translates one language pair; source and target languages are chosen "
                         "for multilingual models only (M2M-100, NLLB-200)")


def unknown_code_error(code, known, what):
    """The one-line `ValueError` for a code that is not in `known`, naming the closest valid codes."""
    import difflib

    closest = difflib.get_close_matches(str(code), list(known), n=4, cutoff=0.0)
    return ValueError(f"{what}: unknown language code {code!r}; closest: {', '.join(closest)} (the model has "
                      f"{len(known)} codes)")


def row_codes(known, languages, count, default, what):
    """Each row's language code, checked against `known`: `languages` is one code, one per row (`count`), or
    `None` for `default`.

    Raises:
        ValueError: an unknown code (naming the closest valid ones), a list of the wrong length, or no language where
            there is no default.
    """
    if languages is None:
        languages = default
    if languages is None:
        raise ValueError(f"{what}: required, this model translates between {len(known)} languages (codes such as "
                         f"{', '.join(list(known)[:4])})")
    if isinstance(languages, (str, bytes)):
        languages = [languages] * count
    languages = [code.decode("utf-8") if isinstance(code, bytes) else code for code in languages]
    if len(languages) != count:
        raise ValueError(f"{what}: {len(languages)} codes for {count} texts; give one code, or one per text")
    valid = set(known)
    for code in languages:
        if code not in valid:
            raise unknown_code_error(code, known, what)
    return languages


def language_ids(tokenizer, languages, count, default, what):
    """int32 `[count]`: the id of each row's language code (see `row_codes`)."""
    codes = row_codes(tokenizer.languages, languages, count, default, what)
    ids = {code: tokenizer.language_id(code) for code in set(codes)}
    return np.array([ids[code] for code in codes], dtype="int32")


def pack_with_languages(rows, source_ids, end_id, max_length, pad_to_multiple=8):
    """Sources `[language] X </s>`, 0-padded to a multiple of `pad_to_multiple` columns: int32 `[B, S]`, as the one
    packer lays them out with a start id (here one per row)."""
    packed = pack_rows([[int(code)] + list(row) for code, row in zip(source_ids, rows)], None, end_id, max_length)
    width = -(-packed.shape[1] // pad_to_multiple) * pad_to_multiple
    return np.pad(packed, ((0, 0), (0, width - packed.shape[1])))


def translate_into(translator, texts, todo, rows, sampler, pair, batch_size, max_length, progress=None):
    """The translations of `texts[i]` for `i` in `todo` (`rows`: their token ids), each from its source language
    (the code starts its source) into its target language (forced as the first token), in batches of `batch_size`
    sorted by length. `pair` is `(source_language, target_language)`: one code, one per text (of `texts`), or
    `None` for the tokenizers' defaults; all are checked before any decoding."""
    source_language, target_language = pair
    source, target = translator.source_tokenizer, translator.target_tokenizer
    check_languages(source, target, source_language, target_language)
    source_ids = language_ids(source, source_language, len(texts), source.source_language, "source_language")[todo]
    target_ids = language_ids(target, target_language, len(texts), target.target_language, "target_language")[todo]
    tokens = [None] * len(rows)
    for chunk in length_batches([len(row) for row in rows], batch_size):
        sources = pack_with_languages([rows[i] for i in chunk], source_ids[chunk], source.end_id,
                                      translator.parts.max_length)
        found, _ = translator._search(sources, sampler, max_length, first_token=target_ids[chunk])
        for row, i in enumerate(chunk):
            tokens[i] = found[row]
        if progress is not None:
            progress(len(chunk))
    if not tokens:
        return []
    width = max(len(row) for row in tokens)
    padded = np.stack([np.pad(row, (0, width - len(row))) for row in tokens])
    return [text.decode("utf-8", errors="replace") for text in target.detokenize(padded).numpy()]
