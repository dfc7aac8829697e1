"""Text in, text out: `BaseTranslator` (what every translator has), and `Translator` (a trained model with its
tokenizers, batched, greedy or beam search)."""

import math
import os

import keras
import numpy as np

from keras_transformer.data.packing import pack_rows
from keras_transformer.data.words import is_blank
from keras_transformer.decoding import arguments
from keras_transformer.decoding.beam_search import DEFAULT_LENGTH_PENALTY
from keras_transformer.decoding.samplers import BeamSampler
from keras_transformer.decoding.samplers import GreedySampler
from keras_transformer.decoding.samplers import Sampler
from keras_transformer.decoding.samplers import generate
from keras_transformer.decoding.samplers import get_sampler
from keras_transformer.decoding.tuning import DecodingSettings
from keras_transformer.models import EnsembleParts
from keras_transformer.models import TransformerParts


class BaseTranslator:
    """What every translator has, whatever runs it (`keras_transformer.load_translator` returns one): `translate`.

    `translate(texts, beam_size=None, length_penalty=None, batch_size=32, max_length=None, verbose=0)` returns a
    list of strings, one per text, in order; a blank text gives `""`.

    - `texts`: Python strings (or UTF-8 bytes).
    - `beam_size`: 1 greedy, more for beam search of that width.
    - `length_penalty`: the length penalty's exponent for beam search (greedy decoding has none).
    - `batch_size`: sentences decoded together (a sentence's translation does not depend on its batch).
    - `max_length`: most output tokens.
    - `verbose`: 0 quiet, 1 a progress bar.

    `None` for `beam_size`, `length_penalty` or `max_length` means as the artifact decodes by default: a run as its
    `decoding.json` says (else greedy), an export as it was exported. An export whose decoding is fixed in its graph
    raises `ValueError`, naming the argument, for a value it cannot decode with.
    """

    def translate(self, texts, beam_size=None, length_penalty=None, batch_size=32, max_length=None, verbose=0):
        """Translates a list of sentences; returns a list of strings in the same order (see the class)."""
        raise NotImplementedError

    def supports(self, method):
        """Whether this translator answers `method` (`"translate_n_best"`, `"score"`, `"translate_with_prefix"`,
        `"align"`, `"stream"`), rather than refusing it with `ValueError`."""
        own = getattr(type(self), method, None)
        return callable(own) and own is not getattr(BaseTranslator, method, None)

    def _unsupported(self, what):
        return ValueError(f"{what} needs a run directory or a CTranslate2 export; a {type(self).__name__} returns "
                          "translations only")

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


def translate_in_batches(texts, batch_size, verbose, translate_batch):
    """`translate_batch(list of UTF-8 bytes) -> list of str` over `texts`, sorted by length, `batch_size` at a time;
    the translations in the order of `texts`."""
    batch_size = arguments.check_positive_int("batch_size", batch_size)
    encoded = [t.encode("utf-8") if isinstance(t, str) else bytes(t) for t in texts]
    outputs = [""] * len(encoded)
    order = np.argsort([len(t) for t in encoded], kind="stable")
    progress = None
    if verbose and len(encoded):
        import keras

        progress = keras.utils.Progbar(len(encoded), unit_name="sentence")
    for begin in range(0, len(order), batch_size):
        chunk = order[begin: begin + batch_size]
        for i, text in zip(chunk, translate_batch([encoded[i] for i in chunk])):
            outputs[i] = text
        if progress is not None:
            progress.add(len(chunk))
    return outputs


def sampler_for(default, beam_size=None, length_penalty=None):
    """The sampler that `translate(beam_size=..., length_penalty=...)` decodes with.

    Args:
        default: the translator's own decoding: a `DecodingSettings` (a run's `decoding.json`), a sampler, or `None`
            (greedy).
        beam_size: `None` (the default's), 1 (greedy) or more (beam search).
        length_penalty: `None` (the default's, else `BeamSampler`'s) or the exponent for beam search.

    The default's length penalty rule and `force_end` are kept. A sampling default (top-k, top-p, random) is kept
    while `beam_size` is `None`.
    """
    if isinstance(default, Sampler):
        if beam_size is None and (length_penalty is None or not isinstance(default, BeamSampler)):
            return default
        if isinstance(default, BeamSampler):
            default = DecodingSettings(beam_size=default.num_beams, length_penalty=default.length_penalty,
                                       length_penalty_rule=default.length_penalty_rule, force_end=default.force_end)
        else:
            default = DecodingSettings(beam_size=1, length_penalty=DEFAULT_LENGTH_PENALTY,
                                       force_end=getattr(default, "force_end", False))
    default = default or DecodingSettings(beam_size=1, length_penalty=DEFAULT_LENGTH_PENALTY)
    beam_size = arguments.check_positive_int("beam_size", default.beam_size if beam_size is None else beam_size)
    if beam_size == 1:
        return GreedySampler(force_end=default.force_end)
    return BeamSampler(num_beams=beam_size,
                       length_penalty=default.length_penalty if length_penalty is None else length_penalty,
                       length_penalty_rule=default.length_penalty_rule, force_end=default.force_end)


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


class Translator(BaseTranslator):
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
        max_length: longest output in tokens; default `decoding`'s, else the model's `max_length`.
        jit_compile: decode with a compiled loop, compiled once per batch shape and cached; default `True` on
            TensorFlow and JAX (XLA), `False` on PyTorch, whose `torch.compile` unrolls the decoding loop and takes
            minutes per batch shape on CPU.
        decoding: how `translate` decodes by default: a `DecodingSettings` (a run's `decoding.json`: beam size,
            length penalty and its rule, `max_length`, `force_end`); `None` greedy.

    Example:

    >>> from keras_transformer import load_run
    >>> run = load_run(run_dir)  # a directory written by `train`
    >>> translator = Translator(run.model, run.source_tokenizer, run.target_tokenizer)
    >>> outputs = translator.translate(["the first of May, nineteen ninety-nine", ""], beam_size=2)
    >>> len(outputs), outputs[1]
    (2, '')
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, max_length=None, jit_compile=None, decoding=None):
        if isinstance(model, (list, tuple)):
            model = EnsembleParts(model)
        if isinstance(model, EnsembleParts):
            self.parts = self.model = model  # the decoders take the parts; compiled loops are cached on them
        else:
            self.model = model
            self.parts = TransformerParts.from_model(model)
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.decoding = decoding
        self.max_length = max_length or getattr(decoding, "max_length", None) or self.parts.max_length
        self.jit_compile = keras.backend.backend() != "torch" if jit_compile is None else jit_compile

    def decoding_sampler(self, beam_size=None, length_penalty=None):
        """The sampler `translate(beam_size=..., length_penalty=...)` decodes with (see `sampler_for`)."""
        return sampler_for(self.decoding, beam_size, length_penalty)

    def translate_ids(self, texts, sampler, max_length=None):
        """Output token ids `[B, L]` (after `[START]`, 0-padded) of one batch of texts, and their source ids."""
        return self._decode_rows(tokenize_rows(self.source_tokenizer, texts), sampler, max_length)

    def _decode_rows(self, rows, sampler, max_length):
        source_ids = pad_source_rows(rows, self.source_tokenizer, self.parts.max_length)
        start, end = self.target_tokenizer.start_id, self.target_tokenizer.end_id
        tokens = generate(self.model, source_ids, max_length or self.max_length, start, end, sampler=sampler,
                          jit_compile=self.jit_compile)
        return np.asarray(tokens), source_ids

    def translate(self, texts, beam_size=None, length_penalty=None, batch_size=32, max_length=None, verbose=0):
        """Translates a list of sentences; returns a list of strings in the same order.

        Args:
            texts: Python strings (or UTF-8 bytes).
            beam_size: 1 greedy, more for beam search; `None` as `decoding` says (else greedy).
            length_penalty: the exponent of beam search's length penalty (GNMT's alpha, or transformers' with
                `decoding`'s `length_penalty_rule`); `None` as `decoding` says, else `BeamSampler`'s 0.6
                (`keras-transformer tune` chooses one on a held-out set).
            batch_size: sentences decoded together (sorted by length first).
            max_length: most output tokens; default the translator's.
            verbose: 0 quiet, 1 a progress bar.
        """
        sampler = self.decoding_sampler(beam_size, length_penalty)
        return self.translate_with_sampler(texts, sampler, batch_size=batch_size, max_length=max_length,
                                           verbose=verbose)

    def translate_with_sampler(self, texts, sampler, batch_size=32, max_length=None, verbose=0):
        """`translate` with any `keras_transformer.decoding.samplers` sampler (an object, a name or a config dict).
        """
        import keras

        batch_size = arguments.check_positive_int("batch_size", batch_size)
        sampler = get_sampler(sampler)
        texts = [t if isinstance(t, str) else t.decode("utf-8", errors="replace") for t in texts]
        outputs = [""] * len(texts)
        # Blank as the exported graph sees it (FastWordpiece's whitespace), so both give the same outputs.
        todo = [i for i, t in enumerate(texts) if not is_blank(t)]
        rows = dict(zip(todo, tokenize_rows(self.source_tokenizer, [texts[i] for i in todo])))  # tokenized once
        order = sorted(todo, key=lambda i: len(rows[i]))  # stable: equal lengths keep their order
        progress = keras.utils.Progbar(len(order), unit_name="sentence") if verbose and order else None
        for begin in range(0, len(order), batch_size):
            chunk = order[begin: begin + batch_size]
            tokens, _ = self._decode_rows([rows[i] for i in chunk], sampler, max_length)
            decoded = self.target_tokenizer.detokenize(tokens).numpy()
            for i, text in zip(chunk, decoded):
                outputs[i] = text.decode("utf-8", errors="replace")
            if progress is not None:
                progress.add(len(chunk))
        return outputs

    def plot_attention(self, text, path, beam_size=None, layer_index=-1):
        """Save a heat map of the cross-attention (averaged over heads) for one sentence to `path`."""
        if isinstance(self.parts, EnsembleParts):
            raise ValueError("--plot-attention shows one model's cross-attention; an ensemble has one per member: "
                             "plot a member's run directory instead")
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from keras import ops

        tokens, source_ids = self.translate_ids([text], self.decoding_sampler(beam_size))
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

