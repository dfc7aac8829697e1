"""A heat map of a translation's cross-attention (`Translator.plot_attention`, `translate --plot-attention`)."""

import os

import numpy as np


def plot_cross_attention(translator, text, path, beam_size=None, layer_index=-1):
    """Saves the cross-attention of `translator`'s last (or `layer_index`) decoder layer, averaged over heads, for
    the translation of `text` to `path` (a PNG), and returns `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from keras import ops

    tokens, source_ids = translator.translate_ids([text], translator.decoding_sampler(beam_size))
    out = [int(t) for t in tokens[0] if t != 0]
    decoder_inputs = np.array([[translator.target_tokenizer.start_id] + out[:-1]], dtype="int32") if out else None
    if decoder_inputs is None:
        raise ValueError("The translation is empty; nothing to plot.")
    src = [int(t) for t in source_ids[0] if t != 0]
    weights = translator.parts.cross_attention_weights(source_ids[:, : len(src)], decoder_inputs, layer_index)
    weights = ops.convert_to_numpy(ops.mean(ops.cast(weights, "float32"), axis=1))[0]
    src_labels = translator.source_tokenizer.tokens(src)
    tgt_labels = translator.target_tokenizer.tokens(out)
    fig, ax = plt.subplots(figsize=(max(4, 0.45 * len(src_labels) + 2), max(3, 0.4 * len(tgt_labels) + 1.5)))
    image = ax.imshow(weights, cmap="viridis", aspect="auto", vmin=0.0)
    ax.set_xticks(range(len(src_labels)), src_labels, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(tgt_labels)), tgt_labels, fontsize=8)
    ax.set_xlabel("source tokens")
    ax.set_ylabel("generated tokens")
    translation = translator.target_tokenizer.detokenize(np.array([out])).numpy()[0].decode("utf-8", "replace")
    ax.set_title(f"cross-attention (last decoder layer, mean of heads)\n{text!r} -> {translation!r}", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
