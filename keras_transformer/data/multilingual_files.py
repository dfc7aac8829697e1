"""The tokenizer files of M2M-100 and NLLB-200 checkpoints (Hugging Face layout) read into what a
`MultilingualTokenizer` is built from: the vocabulary (token -> checkpoint id), the language codes, the special tokens
and the default languages, with errors that name the file.

* NLLB-200 (`checkpoint_style` `"nllb"`): `tokenizer.json`'s `"model"` `"vocab"` holds the pieces' ids and its
  special `"added_tokens"` the language codes (and `<s>`, `<pad>`, `</s>`, `<unk>`, `<mask>`), with their ids.
* M2M-100 (`"m2m_100"`): `vocab.json` holds the pieces' ids; the language tokens (`"__de__"`) are the additional
  special tokens that `tokenizer_config.json` or `special_tokens_map.json` lists, with the ids after the vocabulary in
  that order (transformers' `M2M100Tokenizer` numbers its own list of codes so; published checkpoints list them in
  that order).

Both read the special tokens' names, `src_lang` and `tgt_lang` from `tokenizer_config.json` (else
`special_tokens_map.json`, else fairseq's names) where present.
"""

import os

from keras_transformer.data.marian_vocabulary import read_json
from keras_transformer.data.marian_vocabulary import read_vocab_json
from keras_transformer.data.marian_vocabulary import vocab_in_id_order

SPM_FILE = "sentencepiece.bpe.model"
NO_CODES = "a multilingual checkpoint's vocabulary must hold its language codes"
_SPECIAL_NAMES = ("bos_token", "pad_token", "eos_token", "unk_token", "mask_token", "cls_token", "sep_token")
_DEFAULT_SPECIALS = {"bos_token": "<s>", "pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>",
                     "mask_token": "<mask>", "cls_token": "<s>", "sep_token": "</s>"}


def checkpoint_style(directory):
    """`"nllb"` or `"m2m_100"`: `tokenizer_config.json`'s `tokenizer_class` where it names one (`NllbTokenizer`,
    `NllbTokenizerFast`, `M2M100Tokenizer`), else the files (`vocab.json` beside `sentencepiece.bpe.model`: M2M-100;
    `tokenizer.json` without `vocab.json`: NLLB).

    Raises:
        ValueError: naming the missing file.
    """
    kind = str(_optional_json(os.path.join(directory, "tokenizer_config.json")).get("tokenizer_class") or "")
    if kind.startswith(("Nllb", "M2M100")):
        return "nllb" if kind.startswith("Nllb") else "m2m_100"
    _require(directory, SPM_FILE)
    if os.path.isfile(os.path.join(directory, "vocab.json")):
        return "m2m_100"
    if os.path.isfile(os.path.join(directory, "tokenizer.json")):
        return "nllb"
    raise ValueError(f"{os.path.join(directory, 'tokenizer.json')}: not found; expected it (NLLB-200) or vocab.json "
                     f"(M2M-100) beside {SPM_FILE}")


def read_nllb_files(directory):
    """An NLLB-200 tokenizer's files: `sentencepiece.bpe.model`, `tokenizer.json`, and `tokenizer_config.json` /
    `special_tokens_map.json` where present.

    Returns:
        a dict of `spm_path`, `vocab_path` (`tokenizer.json`'s) and `MultilingualTokenizer`'s keyword arguments
        (`original_vocab`, `languages`, `special_tokens`, `style`, the special tokens, the default languages).

    Raises:
        ValueError: in one line naming the file that is missing or does not hold what is expected (no language
            codes, `legacy_behaviour`, an id given twice).
    """
    spm_path, json_path = _require(directory, SPM_FILE), _require(directory, "tokenizer.json")
    config, names = _special_names(directory)
    if config.get("legacy_behaviour"):
        raise ValueError(f"{os.path.join(directory, 'tokenizer_config.json')}: legacy_behaviour = true (sources "
                         "`X </s> [source language]`) is not supported; expected sources `[source language] X </s>` "
                         "(legacy_behaviour false)")
    data = read_json(json_path, "a tokenizers tokenizer.json")
    model = data.get("model") if isinstance(data, dict) else None
    vocab = model.get("vocab") if isinstance(model, dict) else None
    if isinstance(vocab, list):  # a Unigram model: [[piece, score], ...]
        vocab = {item[0] if isinstance(item, list) else item: i for i, item in enumerate(vocab)}
    added = data.get("added_tokens", []) if isinstance(data, dict) else []
    if not isinstance(vocab, dict) or not isinstance(added, list):
        raise ValueError(f"{json_path}: expected a \"model\" with a \"vocab\" and a list of \"added_tokens\"")
    for token in added:
        if not (isinstance(token, dict) and isinstance(token.get("content"), str) and isinstance(token.get("id"), int)):
            raise ValueError(f"{json_path}: expected added tokens with a \"content\" and an \"id\", found "
                             f"{str(token)[:80]}")
    original_vocab, languages, special = dict(vocab), [], set()
    for token in sorted(added, key=lambda t: t["id"]):
        content, token_id = token["content"], token["id"]
        if original_vocab.setdefault(content, token_id) != token_id:
            raise ValueError(f"{json_path}: the added token {content!r} has the id {token_id} and also "
                             f"{original_vocab[content]}")
        if token.get("special", False):
            special.add(content)
            if content not in names.values():
                languages.append(content)
    try:
        vocab_in_id_order(original_vocab)
    except ValueError as error:
        raise ValueError(f"{json_path}: {error}") from None
    if not languages:
        raise ValueError(f"{json_path}: {NO_CODES}; found none among its special added tokens")
    return _arguments(directory, spm_path, json_path, original_vocab, {code: code for code in languages}, config,
                      names, special, "nllb")


def read_m2m100_files(directory):
    """An M2M-100 tokenizer's files: `sentencepiece.bpe.model`, `vocab.json`, and `tokenizer_config.json` /
    `special_tokens_map.json` (which list the language tokens).

    Returns:
        as `read_nllb_files`, with `vocab.json`'s path; the language codes are the tokens without their underscores.

    Raises:
        ValueError: in one line naming the file that is missing or does not hold what is expected.
    """
    spm_path, vocab_path = _require(directory, SPM_FILE), _require(directory, "vocab.json")
    config, names = _special_names(directory)
    vocab = read_vocab_json(vocab_path)
    listed = _listed_special_tokens(directory)
    tokens = list(dict.fromkeys(token for token in listed
                                if len(token) > 4 and token.startswith("__") and token.endswith("__")))
    if not tokens:
        raise ValueError(f"{vocab_path}: {NO_CODES}; found no language tokens (\"__de__\") among the additional "
                         "special tokens of tokenizer_config.json or special_tokens_map.json")
    clash = [token for token in tokens if token in vocab]
    if clash:
        raise ValueError(f"{vocab_path}: already holds the language tokens {clash[:4]}; expected them after the "
                         "vocabulary")
    original_vocab = dict(vocab)
    for token in tokens:
        original_vocab[token] = len(original_vocab)
    return _arguments(directory, spm_path, vocab_path, original_vocab, {token[2:-2]: token for token in tokens},
                      config, names, set(), "m2m_100")


def _arguments(directory, spm_path, vocab_path, original_vocab, languages, config, names, special, style):
    """The dict that the readers return, with `src_lang` and `tgt_lang` checked against the codes."""
    arguments = {}
    for key, name in (("src_lang", "source_language"), ("tgt_lang", "target_language")):
        value = config.get(key)
        if value is not None and value not in languages:
            raise ValueError(f"{os.path.join(directory, 'tokenizer_config.json')}: {key} {value!r} is not one of the "
                             f"{len(languages)} language codes")
        arguments[name] = value
    special |= {names[name] for name in ("bos_token", "mask_token", "cls_token", "sep_token")}
    return {**arguments, "spm_path": spm_path, "vocab_path": vocab_path, "original_vocab": original_vocab,
            "languages": languages, "special_tokens": sorted(special), "style": style,
            "pad_token": names["pad_token"], "unk_token": names["unk_token"], "eos_token": names["eos_token"],
            "decoder_start_token": names["eos_token"]}


def _require(directory, name):
    path = os.path.join(directory, name)
    if not os.path.isfile(path):
        raise ValueError(f"{path}: not found")
    return path


def _optional_json(path):
    """A JSON object file's content, `{}` when the file is missing."""
    if not os.path.isfile(path):
        return {}
    data = read_json(path, "a JSON object")
    if not isinstance(data, dict):
        raise ValueError(f"{path}:1: expected a JSON object")
    return data


def _token_name(value):
    """A special token as tokenizer configs write it: a string, or an object with its "content"."""
    return value.get("content") if isinstance(value, dict) else value


def _special_names(directory):
    """`(tokenizer_config, names)`: the config (`{}` when missing) and the special tokens' names (`bos_token`, ...)
    from it, else `special_tokens_map.json`, else fairseq's."""
    config = _optional_json(os.path.join(directory, "tokenizer_config.json"))
    mapping = _optional_json(os.path.join(directory, "special_tokens_map.json"))
    names = {name: str(_token_name(config.get(name)) or _token_name(mapping.get(name)) or _DEFAULT_SPECIALS[name])
             for name in _SPECIAL_NAMES}
    return config, names


def _listed_special_tokens(directory):
    """The additional special tokens that `tokenizer_config.json` (`extra_special_tokens`,
    `additional_special_tokens`) or else `special_tokens_map.json` lists, in order."""
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        data = _optional_json(os.path.join(directory, name))
        for key in ("extra_special_tokens", "additional_special_tokens"):
            listed = data.get(key)
            if isinstance(listed, dict):
                listed = list(listed.values())
            if isinstance(listed, list) and listed:
                return [str(_token_name(token)) for token in listed]
    return []


__all__ = ["NO_CODES", "SPM_FILE", "checkpoint_style", "read_m2m100_files", "read_nllb_files"]
