"""An NLLB-style M2M-100 checkpoint made here: random weights (transformers' `M2M100ForConditionalGeneration`) and a
BPE tokenizer trained here, in the Hugging Face layout; and transformers' own translations of it."""

import numpy as np

from tests.importers.m2m_100_files import write_nllb_tokenizer_files

LANGUAGES = ("eng_Latn", "deu_Latn", "fra_Latn", "spa_Latn")
MAX_NEW = 12  # generated tokens, the forced language code included


def sentences(count, seed=0):
    words = ["the", "house", "is", "small", "der", "Hund", "läuft", "schnell", "le", "chat", "dort", "très",
             "el", "perro", "come", "mucho", "über", "naïve", "café", "2024", "?", "!"]
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(words, size=rng.integers(1, 9))) for _ in range(count)]


def make_m2m_100_checkpoint(directory, languages=LANGUAGES):
    """Writes the checkpoint into `directory`; returns `(model, tokenizer)`, transformers' objects."""
    import torch
    import transformers

    tokenizer = write_nllb_tokenizer_files(directory, languages)
    config = transformers.M2M100Config(
        vocab_size=len(tokenizer), d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64, dropout=0.0,
        attention_dropout=0.0, activation_dropout=0.0, init_std=0.3, scale_embedding=True, pad_token_id=1,
        bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, max_length=MAX_NEW + 1)
    torch.manual_seed(0)
    model = transformers.M2M100ForConditionalGeneration(config).eval()
    with torch.no_grad():  # a stronger end token: some translations end at once, the others run to the limit
        model.model.shared.weight[2] *= 1.5
    model.save_pretrained(directory)
    return model, tokenizer


def reference_translations(model, tokenizer, texts, source, targets, num_beams, ids=False):
    """transformers' translations of `texts` from `source` into `targets` (one code per text): `generate` with
    `forced_bos_token_id`, then `batch_decode(skip_special_tokens=True)`; with `ids`, the generated ids instead
    (after the decoder's start, up to and including `</s>`), a list per text."""
    import torch

    tokenizer.src_lang = source
    outputs = []
    for target in sorted(set(targets)):
        rows = [i for i, t in enumerate(targets) if t == target]
        batch = tokenizer([texts[i] for i in rows], return_tensors="pt", padding=True)
        with torch.no_grad():
            generated = model.generate(**batch, forced_bos_token_id=tokenizer.convert_tokens_to_ids(target),
                                       num_beams=num_beams, max_length=MAX_NEW + 1, do_sample=False)
        if ids:
            found = [_until_end(row[1:]) for row in generated.numpy().tolist()]
        else:
            found = tokenizer.batch_decode(generated, skip_special_tokens=True)
        outputs += list(zip(rows, found))
    return [text for _, text in sorted(outputs)]


def _until_end(row, end=2):
    return row[: row.index(end) + 1] if end in row else row
