"""The tokenizer files of small NLLB-200 and M2M-100 checkpoints, made on the spot in the Hugging Face layout.

`write_nllb_tokenizer_files(directory)` trains a SentencePiece BPE model (about 300 pieces) on generated sentences in
four languages and lets transformers' own `NllbTokenizer` write `tokenizer.json` and `tokenizer_config.json` beside
it (plus `special_tokens_map.json`, as published checkpoints have); `write_m2m100_tokenizer_files(directory)` writes
`vocab.json` in fairseq's layout (its own order, a few pieces left out) and lets `M2M100Tokenizer` write its files.
Each returns transformers' tokenizer read back from the directory. Nothing is downloaded; a model's `config.json` and
weights can be written beside.
"""

import io
import json
import os
import random

LANGUAGES = ("eng_Latn", "deu_Latn", "fra_Latn", "spa_Latn")
WORDS = {
    "eng": "the a house is small dog cat runs fast water city green blue big old new and of to in it was day".split(),
    "deu": "der die das Hund läuft schnell Haus ist klein Straße über größer schön Mädchen Wasser und nicht ein "
           "ß Ärger Öl Übung".split(),
    "fra": "le la les chat dort très maison petit garçon été déjà naïve café où ça être et un une rue".split(),
    "spa": "el los perro come mucho casa pequeño niño año mañana señor corazón está y una calle".split(),
}
EXTRA = ["2024", "42", "7", "?", "!", ",", ".", "(", ")", "\"", "'", "-", ":", "€", "½", "東京", "😀"]


def sentences(count=400, seed=0):
    """Short sentences, each in one of the four languages, with digits and punctuation now and then."""
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        words = WORDS[rng.choice(sorted(WORDS))]
        line = [rng.choice(words) if rng.random() > 0.1 else rng.choice(EXTRA) for _ in range(rng.randint(2, 10))]
        text = " ".join(line)
        lines.append(text[0].upper() + text[1:] + rng.choice([".", "!", "?", ""]))
    return lines


def train_bpe(vocab_size=300, seed=0):
    """A serialized SentencePiece BPE model trained on `sentences()` (SentencePiece's default ids: `<unk>` 0, `<s>`
    1, `</s>` 2, as NLLB's and M2M-100's models have)."""
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences(400, seed)), model_writer=model, model_type="bpe", vocab_size=vocab_size,
        hard_vocab_limit=False, character_coverage=1.0, num_threads=1, minloglevel=2)
    return model.getvalue()


def _write_special_tokens_map(directory, additional, mask):
    special = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "sep_token": "</s>", "pad_token": "<pad>",
               "additional_special_tokens": list(additional)}
    if mask:  # NLLB's
        special["cls_token"] = "<s>"
        special["mask_token"] = {"content": "<mask>", "lstrip": True, "normalized": True, "rstrip": False,
                                 "single_word": False}
    with open(os.path.join(directory, "special_tokens_map.json"), "w", encoding="utf-8") as f:
        json.dump(special, f, indent=2, ensure_ascii=False)


def with_filler_pieces(model, count):
    """A serialized SentencePiece model with `count` filler pieces (`<fillN>`) after its own, scored below all of
    them: made up to the size of a real vocabulary, they are computed by the model and never reached by BPE's merges
    (no text has `<`)."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model)
    low = min(piece.score for piece in proto.pieces) - 1.0
    normal = sentencepiece_model_pb2.ModelProto.SentencePiece.NORMAL
    for i in range(count):
        piece = proto.pieces.add()
        piece.piece, piece.score, piece.type = f"<fill{i}>", low, normal
    return proto.SerializeToString()


def write_nllb_tokenizer_files(directory, languages=LANGUAGES, source_language=None, target_language=None,
                               legacy_behaviour=False, vocab_size=300, filler_pieces=0):
    """Writes an NLLB-200 checkpoint's tokenizer files into `directory` (made if missing; files there are replaced).

    `sentencepiece.bpe.model` (trained here), and what transformers' `NllbTokenizer`, built from it with
    `additional_special_tokens=languages`, saves: `tokenizer.json` (the ids: fairseq's `<s>` 0, `<pad>` 1, `</s>` 2,
    `<unk>` 3, the pieces, then `<mask>` and the language codes as added tokens), `tokenizer_config.json` (with
    `src_lang`, `tgt_lang` and `legacy_behaviour` as given); and `special_tokens_map.json`. `languages=()` writes a
    vocabulary without language codes; `filler_pieces` make the vocabulary a real checkpoint's size
    (`with_filler_pieces`).

    Returns:
        transformers' tokenizer read back from `directory` (`AutoTokenizer.from_pretrained`), whose `len()` is the
        vocabulary size a model's `config.json` takes.
    """
    import transformers

    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "sentencepiece.bpe.model"), "wb") as f:
        f.write(with_filler_pieces(train_bpe(vocab_size), filler_pieces))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if os.path.exists(os.path.join(directory, name)):
            os.remove(os.path.join(directory, name))  # built from the model file alone, not from an earlier copy
    tokenizer = transformers.NllbTokenizer.from_pretrained(
        directory, additional_special_tokens=list(languages), src_lang=source_language, tgt_lang=target_language,
        legacy_behaviour=legacy_behaviour)
    tokenizer.save_pretrained(directory)
    _write_special_tokens_map(directory, languages, mask=True)
    return transformers.AutoTokenizer.from_pretrained(directory)


def write_m2m100_tokenizer_files(directory, language_codes="wmt21", source_language=None, target_language=None,
                                 vocab_size=300, left_out=3, seed=0):
    """Writes an M2M-100 checkpoint's tokenizer files into `directory` (made if missing).

    `sentencepiece.bpe.model` (trained here); `vocab.json` in fairseq's layout: `<s>` 0, `<pad>` 1, `</s>` 2, `<unk>`
    3, then the model's pieces in an order of their own (fairseq's dictionary is sorted by frequency, not by
    SentencePiece id) less `left_out` of them (published M2M-100 dictionaries lack some pieces of their model); and
    what transformers' `M2M100Tokenizer` saves with its language tokens (`language_codes`, transformers' list:
    `"wmt21"` has 8 languages, `"m2m100"` 100) as additional special tokens, plus `special_tokens_map.json`.

    Returns:
        transformers' tokenizer read back from `directory` (`AutoTokenizer.from_pretrained`).
    """
    import sentencepiece
    import transformers
    from transformers.models.m2m_100 import tokenization_m2m_100

    os.makedirs(directory, exist_ok=True)
    model = train_bpe(vocab_size)
    spm_path = os.path.join(directory, "sentencepiece.bpe.model")
    with open(spm_path, "wb") as f:
        f.write(model)
    processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())
              if not (processor.is_control(i) or processor.is_unknown(i))]
    random.Random(seed).shuffle(pieces)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for piece in pieces[left_out:]:
        vocab[piece] = len(vocab)
    vocab_path = os.path.join(directory, "vocab.json")
    with open(vocab_path, "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False, indent=2)
    tokens = [f"__{code}__" for code in tokenization_m2m_100.FAIRSEQ_LANGUAGE_CODES[language_codes]]
    tokenizer = transformers.M2M100Tokenizer(vocab_path, spm_path, src_lang=source_language, tgt_lang=target_language,
                                             language_codes=language_codes, additional_special_tokens=tokens)
    tokenizer.save_pretrained(directory)
    _write_special_tokens_map(directory, tokens, mask=False)
    return transformers.AutoTokenizer.from_pretrained(directory)
