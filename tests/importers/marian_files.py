"""Small Marian (OPUS-MT) checkpoints made on the spot, in the Hugging Face layout, with random weights.

`make_marian_checkpoint(directory)` trains two SentencePiece unigram models (source and target) on generated text,
writes `vocab.json` as OPUS-MT does (`</s>` = 0, `<unk>` = 1, the pieces, `<pad>` last), builds a
`transformers.MarianMTModel` from a `MarianConfig` with weights drawn wider than its initializer's (so that logits
differ clearly between tokens) and saves it with `save_pretrained`. Nothing is downloaded.
"""

import io
import json
import os
import random

import numpy as np

WORDS = ("der die das ein eine Haus Hund Katze läuft spielt Straße über größer schön Mädchen Junge Frau Mann rot "
         "blau grün Wasser Ball Park Stadt café naïve déjà vu Ärger Öl Übung straße 東京 日本 😀 ½ € ß").split()
EN_WORDS = ("the a an house dog cat runs plays street over bigger nice girl boy woman man red blue green water "
            "ball park city coffee naive already seen trouble oil exercise Tokyo Japan").split()


def sentences(words, count, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        line = " ".join(rng.choice(words) for _ in range(rng.randint(2, 12)))
        out.append(line[0].upper() + line[1:] + rng.choice([".", "!", "?", ",", ""]))
    return out


def train_spm(lines, vocab_size):
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab_size, model_type="unigram",
        character_coverage=1.0, hard_vocab_limit=False, minloglevel=2)
    return model.getvalue()


def make_marian_checkpoint(directory, d_model=64, layers=2, heads=4, ffn=128, spm_vocab=300, extra_tokens=0,
                           max_positions=128, activation="swish", seed=0, weights="safetensors", scale=0.15,
                           end_bias=2.5):
    """Writes a Marian checkpoint into `directory` and returns `(model, config)` (the torch model, in eval mode).

    `extra_tokens` appends filler tokens to `vocab.json` (to reach a large vocabulary without a large corpus).
    """
    import sentencepiece
    import torch
    from transformers import MarianConfig
    from transformers import MarianMTModel

    os.makedirs(directory, exist_ok=True)
    protos = {"source.spm": train_spm(sentences(WORDS, 400, seed), spm_vocab),
              "target.spm": train_spm(sentences(EN_WORDS, 400, seed + 1), spm_vocab)}
    vocab = {"</s>": 0, "<unk>": 1}
    for name, proto in protos.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(proto)
        processor = sentencepiece.SentencePieceProcessor(model_proto=proto)
        for i in range(processor.get_piece_size()):
            if not (processor.is_control(i) or processor.is_unknown(i)):
                vocab.setdefault(processor.id_to_piece(i), len(vocab))
    for i in range(extra_tokens):
        vocab[f"▁filler{i}"] = len(vocab)
    vocab["<pad>"] = len(vocab)
    with open(os.path.join(directory, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"source_lang": "de", "target_lang": "en", "model_max_length": 512, "separate_vocabs": False,
                   "tokenizer_class": "MarianTokenizer"}, f)
    size = len(vocab)
    config = MarianConfig(
        vocab_size=size, decoder_vocab_size=size, d_model=d_model, encoder_layers=layers, decoder_layers=layers,
        encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=ffn, decoder_ffn_dim=ffn,
        activation_function=activation, max_position_embeddings=max_positions, pad_token_id=size - 1,
        eos_token_id=0, decoder_start_token_id=size - 1, forced_eos_token_id=0, scale_embedding=True,
        share_encoder_decoder_embeddings=True, dropout=0.1, attention_dropout=0.0, activation_dropout=0.0)
    torch.manual_seed(seed)
    model = MarianMTModel(config)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "embed_positions" in name:
                continue
            if "layer_norm" in name:
                parameter.copy_((1.0 if name.endswith("weight") else 0.0)
                                + 0.1 * torch.randn(parameter.shape, generator=generator))
            else:
                parameter.copy_(scale * torch.randn(parameter.shape, generator=generator))
        model.final_logits_bias.copy_(0.5 * torch.randn(model.final_logits_bias.shape, generator=generator))
        model.final_logits_bias[0, 0] += end_bias  # </s>: most outputs end within a few dozen tokens
    model.eval()
    # OPUS-MT's generation settings (beam 4, pad banned: it is the decoder's start token, forced </s> at max_length),
    # with max_length at the position table's size.
    generation = model.generation_config
    generation.bad_words_ids, generation.num_beams, generation.max_length = [[size - 1]], 4, max_positions
    generation.bos_token_id = 0
    model.save_pretrained(directory, safe_serialization=weights == "safetensors")
    if weights == "pytorch":
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        torch.save(state, os.path.join(directory, "pytorch_model.bin"))
        for name in os.listdir(directory):
            if name.endswith(".safetensors"):
                os.remove(os.path.join(directory, name))
    return model, config


def positions_are_marians(model):
    """Whether the model's sinusoidal tables hold Marian's formula (a check on the reference itself)."""
    table = model.model.encoder.embed_positions.weight.detach().numpy()
    n, d = table.shape
    angles = np.array([[pos / np.power(10000, 2 * (j // 2) / d) for j in range(d)] for pos in range(n)])
    expected = np.concatenate([np.sin(angles[:, 0::2]), np.cos(angles[:, 1::2])], axis=1)
    return np.allclose(table, expected, atol=1e-5)
