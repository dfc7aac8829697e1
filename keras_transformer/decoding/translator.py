"""Text in, text out: a trained model with its tokenizers, batched, greedy or beam search."""

import os

import numpy as np

from keras_transformer.data.packing import pack_rows
from keras_transformer.data.words import is_blank
from keras_transformer.decoding.samplers import BeamSampler
from keras_transformer.decoding.samplers import GreedySampler
from keras_transformer.decoding.samplers import generate
from keras_transformer.models import EnsembleParts
from keras_transformer.models import TransformerParts


def encode_sources(tokenizer, texts, max_length, pad_to_multiple=8):
    """Token ids `[START] text [END]` of each text, truncated to `max_length` and 0-padded: int32 `[B, S]`.

    The same layout as the training pipeline (`keras_transformer.data.make_dataset`).
    """
    return pad_source_rows(tokenize_rows(tokenizer, texts), tokenizer, max_length, pad_to_multiple)


def tokenize_rows(tokenizer, texts):
    """The subword ids of each text, as Python lists (no `[START]`/`[END]`)."""
    return tokenizer.tokenize(list(texts)).numpy().tolist() if len(texts) else []


def pad_source_rows(rows, tokenizer, max_length, pad_to_multiple=8):
    """`encode_sources` for texts already split into subword ids by `tokenize_rows`."""
    # The one source packer (training's and the exported graph's), then padded to a multiple of `pad_to_multiple`
    # columns (fewer distinct shapes for the compiled decoders).
    packed = pack_rows(rows, tokenizer.source_start_id, tokenizer.end_id, max_length)
    width = -(-packed.shape[1] // pad_to_multiple) * pad_to_multiple
    return np.pad(packed, ((0, 0), (0, width - packed.shape[1])))


class Translator:
    """Translate sentences with a model from `build_transformer` and its source/target tokenizers.

    Sentences are sorted by length and decoded in batches (so padding stays small); each
    sentence's translation does not depend on the rest of its batch. Blank lines translate to
    blank lines.

    Args:
        model: the seq2seq `keras.Model`, or a list of them: an ensemble (`EnsembleParts`: their next-token
            log-probabilities averaged at every step), which must share these tokenizers; or an `EnsembleParts`
            (to choose how it combines its members).
        source_tokenizer: `keras_transformer.data.SubwordTokenizer` of the source language.
        target_tokenizer: tokenizer of the target language (may be the same object).
        max_length: longest output in tokens; defaults to the model's `max_length`.
        jit_compile: decode with a cached XLA-compiled loop (much faster on CPU after the first
            batch of each shape).

    Example:

    >>> from keras_transformer import load_run
    >>> run = load_run(run_dir)  # a directory written by `train`
    >>> translator = Translator(run.model, run.source_tokenizer, run.target_tokenizer)
    >>> outputs = translator.translate(["the first of May, nineteen ninety-nine", ""], beam_size=2)
    >>> len(outputs), outputs[1]
    (2, '')
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, max_length=None, jit_compile=True):
        if isinstance(model, (list, tuple)):
            model = EnsembleParts(model)
        if isinstance(model, EnsembleParts):
            self.parts = self.model = model  # the decoders take the parts; compiled loops are cached on them
        else:
            self.model = model
            self.parts = TransformerParts.from_model(model)
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.max_length = max_length or self.parts.max_length
        self.jit_compile = jit_compile

    def translate_ids(self, texts, beam_size=1, max_length=None, sampler=None, length_penalty=None,
                      length_penalty_rule=None, force_end=False):
        """Output token ids `[B, L]` (after `[START]`, 0-padded) of one batch of texts."""
        return self._decode_rows(tokenize_rows(self.source_tokenizer, texts), beam_size, max_length, sampler,
                                 length_penalty, length_penalty_rule, force_end)

    def _decode_rows(self, rows, beam_size, max_length, sampler=None, length_penalty=None, length_penalty_rule=None,
                     force_end=False):
        max_length = max_length or self.max_length
        source_ids = pad_source_rows(rows, self.source_tokenizer, self.parts.max_length)
        start, end = self.target_tokenizer.start_id, self.target_tokenizer.end_id
        if sampler is None:
            beam = {} if length_penalty is None else {"length_penalty": length_penalty}
            if length_penalty_rule is not None:
                beam["length_penalty_rule"] = length_penalty_rule
            sampler = (BeamSampler(num_beams=beam_size, force_end=force_end, **beam) if beam_size > 1
                       else GreedySampler(force_end=force_end))
        tokens = generate(self.model, source_ids, max_length, start, end, sampler=sampler,
                          jit_compile=self.jit_compile)
        return np.asarray(tokens), source_ids

    def translate(self, texts, beam_size=1, batch_size=32, max_length=None, verbose=0, sampler=None,
                  length_penalty=None, length_penalty_rule=None, force_end=False):
        """Translates a list of sentences; returns a list of strings in the same order.

        Args:
            texts: Python strings (or UTF-8 bytes).
            beam_size: 1 greedy, more for beam search (a shorthand for `sampler=BeamSampler(beam_size)`).
            batch_size: sentences decoded together (sorted by length first).
            max_length: most output tokens; default the translator's.
            verbose: 0 silent, 1 a progress bar.
            sampler: any `keras_transformer.decoding.samplers` sampler (or its name); overrides `beam_size`.
            length_penalty: GNMT's alpha for beam search (`None`: `BeamSampler`'s 0.6; `keras-transformer tune`
                chooses one on a held-out set).
            length_penalty_rule: how beam search scores its hypotheses and stops, `"gnmt"` or `"transformers"`
                (see `beam_search`; `None`: `BeamSampler`'s `"gnmt"`). The command line passes the run's choice
                (`decoding.json`) when no `--length-penalty-rule` is given, as it does for the length penalty.
            force_end: a translation that reaches `max_length` ends there (its last token is the end token), as
                transformers' `forced_eos_token_id` makes it; the command line passes the run's choice.
        """
        import keras

        texts = [t if isinstance(t, str) else t.decode("utf-8", errors="replace") for t in texts]
        outputs = [""] * len(texts)
        # Blank as the exported graph sees it (FastWordpiece's whitespace), so both give the same outputs.
        todo = [i for i, t in enumerate(texts) if not is_blank(t)]
        rows = dict(zip(todo, tokenize_rows(self.source_tokenizer, [texts[i] for i in todo])))  # tokenized once
        order = sorted(todo, key=lambda i: len(rows[i]))  # stable: equal lengths keep their order
        progress = keras.utils.Progbar(len(order), unit_name="sentence") if verbose and order else None
        for begin in range(0, len(order), batch_size):
            chunk = order[begin: begin + batch_size]
            tokens, _ = self._decode_rows([rows[i] for i in chunk], beam_size, max_length, sampler, length_penalty,
                                          length_penalty_rule, force_end)
            decoded = self.target_tokenizer.detokenize(tokens).numpy()
            for i, text in zip(chunk, decoded):
                outputs[i] = text.decode("utf-8", errors="replace")
            if progress is not None:
                progress.add(len(chunk))
        return outputs

    def plot_attention(self, text, path, beam_size=1, layer_index=-1):
        """Save a heat map of the cross-attention (averaged over heads) for one sentence to `path`."""
        if isinstance(self.parts, EnsembleParts):
            raise ValueError("--plot-attention shows one model's cross-attention; an ensemble has one per member: "
                             "plot a member's run directory instead")
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from keras import ops

        tokens, source_ids = self.translate_ids([text], beam_size=beam_size)
        out = [int(t) for t in tokens[0] if t != 0]
        decoder_inputs = np.array([[self.target_tokenizer.start_id] + out[:-1]], dtype="int32") if out else None
        if decoder_inputs is None:
            raise ValueError("The translation is empty; nothing to plot.")
        src = [int(t) for t in source_ids[0] if t != 0]
        weights = self.parts.cross_attention_weights(source_ids[:, : len(src)], decoder_inputs, layer_index)
        weights = ops.convert_to_numpy(ops.mean(ops.cast(weights, "float32"), axis=1))[0]
        src_labels = self.source_tokenizer.tokens(src)
        tgt_labels = self.target_tokenizer.tokens(out)
        fig, ax = plt.subplots(figsize=(max(4, 0.45 * len(src_labels) + 2), max(3, 0.4 * len(tgt_labels) + 1.5)))
        image = ax.imshow(weights, cmap="viridis", aspect="auto", vmin=0.0)
        ax.set_xticks(range(len(src_labels)), src_labels, rotation=60, ha="right", fontsize=8)
        ax.set_yticks(range(len(tgt_labels)), tgt_labels, fontsize=8)
        ax.set_xlabel("source tokens")
        ax.set_ylabel("generated tokens")
        translation = self.target_tokenizer.detokenize(np.array([out])).numpy()[0].decode("utf-8", "replace")
        ax.set_title(f"cross-attention (last decoder layer, mean of heads)\n{text!r} -> {translation!r}", fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        fig.tight_layout()
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        fig.savefig(path, dpi=120)
        plt.close(fig)
        return path

