"""Text in, text out: `Translator`, a trained model with its tokenizers (batched greedy or beam search, n-best
lists, scores, target prefixes, word alignments, streaming), and the source packing it shares with the exports."""


import keras
import numpy as np

from keras_transformer.data.packing import pack_rows
from keras_transformer.data.words import is_blank
from keras_transformer.decoding import arguments
from keras_transformer.decoding import compiled_decoders
from keras_transformer.decoding import languages
from keras_transformer.decoding import loop_ops
from keras_transformer.decoding import slot_translation
from keras_transformer.decoding.alignment import align_words
from keras_transformer.decoding.alignment import piece_words
from keras_transformer.decoding.attention_plot import plot_cross_attention
from keras_transformer.decoding.base_translator import BaseTranslator
from keras_transformer.decoding.base_translator import length_batches
from keras_transformer.decoding.batch_shapes import BatchShapes
from keras_transformer.decoding.batch_shapes import pad_batch
from keras_transformer.decoding.batch_shapes import pad_rows
from keras_transformer.decoding.beam_search import DEFAULT_LENGTH_PENALTY
from keras_transformer.decoding.beam_search import _beam_search_alpha_input
from keras_transformer.decoding.beam_search import next_token_log_probs
from keras_transformer.decoding.greedy import greedy_search
from keras_transformer.decoding.samplers import BeamSampler
from keras_transformer.decoding.samplers import GreedySampler
from keras_transformer.decoding.samplers import Sampler
from keras_transformer.decoding.samplers import StochasticSampler
from keras_transformer.decoding.samplers import generate
from keras_transformer.decoding.samplers import get_sampler
from keras_transformer.decoding.streaming import stream_translation
from keras_transformer.decoding.tuning import DecodingSettings
from keras_transformer.models import EnsembleParts
from keras_transformer.models import TransformerParts


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


def _texts(texts):
    return [t if isinstance(t, str) else bytes(t).decode("utf-8", errors="replace") for t in texts]


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
        self.shapes = None  # `fix_shapes`

    def fix_shapes(self, rows, widths):
        """Decode every batch in one of a fixed set of shapes (`BatchShapes(rows, widths)`; `rows` `None`: back to
        the default, `bucket_rows`): a server's compiled decoders then see only the shapes it compiled at warm-up."""
        self.shapes = None if rows is None else BatchShapes(rows, widths, self.parts.max_length)

    def _padded(self, source_ids):
        """`source_ids` `[B, S]` padded to the shape it decodes in (repeated rows, dropped after; 0 columns)."""
        return pad_batch(source_ids, self.shapes)

    @property
    def languages(self):
        """A multilingual model's language codes (its tokenizer's); `()` for a one-pair model."""
        return tuple(self.target_tokenizer.languages) if languages.is_multilingual(self.target_tokenizer) else ()

    @property
    def default_languages(self):
        """The `(source, target)` codes a multilingual model translates with when none are given (`None`: none)."""
        if not self.languages:
            return None, None
        return self.source_tokenizer.source_language, self.target_tokenizer.target_language

    def decoding_sampler(self, beam_size=None, length_penalty=None):
        """The sampler `translate(beam_size=..., length_penalty=...)` decodes with (see `sampler_for`)."""
        return sampler_for(self.decoding, beam_size, length_penalty)

    def translate_ids(self, texts, sampler, max_length=None):
        """Output token ids `[B, L]` (after `[START]`, 0-padded) of one batch of texts, and their source ids."""
        return self._decode_rows(tokenize_rows(self.source_tokenizer, texts), sampler, max_length)

    def _decode_rows(self, rows, sampler, max_length):
        source_ids = pad_source_rows(rows, self.source_tokenizer, self.parts.max_length)
        start, end = self.target_tokenizer.start_id, self.target_tokenizer.end_id
        padded = self._padded(source_ids)
        tokens = generate(self.model, padded, max_length or self.max_length, start, end, sampler=sampler,
                          jit_compile=self.jit_compile)
        return np.asarray(tokens)[: len(rows)], source_ids

    def _search(self, source_ids, sampler, max_length, prefix=None, num_hypotheses=1, with_scores=False,
                first_token=None):
        """Greedy or beam search over `source_ids` (optionally forced through `prefix` int32 `[B, P]`), compiled as
        `translate` is: `(tokens, scores)` as NumPy, `[B, L]` and `[B]` (`[B, n, L]` and `[B, n]` for
        `num_hypotheses` n > 1; scores `None` for greedy decoding, which `with_scores` runs as beam search of
        width 1, the same tokens)."""
        if not isinstance(sampler, (GreedySampler, BeamSampler)):
            raise ValueError(f"n-best lists, target prefixes and alignments decode greedily or by beam search, not "
                             f"with {type(sampler).__name__}")
        count = source_ids.shape[0]
        inputs = {"encoder_inputs": self._padded(source_ids)}
        rows = inputs["encoder_inputs"].shape[0]
        if prefix is not None:
            inputs["prefix"] = pad_rows(np.asarray(prefix, dtype="int32"), rows)
        settings = dict(max_length=max_length or self.max_length, start_id=self.target_tokenizer.start_id,
                        end_id=self.target_tokenizer.end_id, force_end=bool(sampler.force_end), stop_early=True)
        if isinstance(sampler, GreedySampler) and num_hypotheses == 1 and not with_scores:
            function = greedy_search
            if first_token is not None:  # greedy decoding takes the forced token whatever it costs
                inputs["prefix"] = pad_rows(np.asarray(first_token, dtype="int32")[:, None], rows)
        else:
            inputs.update({} if first_token is None else {"first_token": pad_rows(np.asarray(first_token), rows)})
            function = _beam_search_alpha_input
            beam = sampler.num_beams if isinstance(sampler, BeamSampler) else 1
            alpha = sampler.length_penalty if isinstance(sampler, BeamSampler) else DEFAULT_LENGTH_PENALTY
            rule = sampler.length_penalty_rule if isinstance(sampler, BeamSampler) else "gnmt"
            settings.update(beam_size=max(beam, num_hypotheses), length_penalty_rule=rule,
                            num_hypotheses=num_hypotheses)
            inputs["length_penalty"] = np.full((rows,), alpha, dtype="float32")
        if self.jit_compile:
            outputs = compiled_decoders.run_compiled(self.model, self.parts, function, inputs, settings)
        else:
            outputs = function(self.parts, **inputs, **settings)
        if function is greedy_search:
            return keras.ops.convert_to_numpy(outputs)[:count], None
        tokens, scores = (keras.ops.convert_to_numpy(o)[:count] for o in outputs)
        return tokens, scores

    def _detokenize(self, tokens):
        """Strings of int32 token rows `[N, L]` (0 after the end token)."""
        if not len(tokens):
            return []
        return [t.decode("utf-8", errors="replace") for t in self.target_tokenizer.detokenize(tokens).numpy()]

    def _check_single_model(self, what):
        if isinstance(self.parts, EnsembleParts):
            raise ValueError(f"{what} reads one model's probabilities or attention; an ensemble averages several: "
                             "use a member's run directory")

    def translate_n_best(self, texts, n_best, beam_size=None, length_penalty=None, batch_size=32, max_length=None):
        """The `n_best` best translations of each text by beam search, best first: a list (one per text) of
        `(translation, score)` pairs, each score the hypothesis' log-probability over the length penalty.

        The beam is `max(beam_size, n_best)` wide (`beam_size` `None`: as `translate` decodes); its best
        hypothesis is what `translate` gives with that beam. A row may have fewer than `n_best` when fewer
        hypotheses end within `max_length`; a blank text gives `[("", 0.0)]`.
        """
        self._one_pair_only("n-best lists")
        n_best = arguments.check_positive_int("n_best", n_best)
        default_beam = getattr(self.decoding_sampler(), "num_beams", 1)
        sampler = self.decoding_sampler(max(beam_size or default_beam, n_best), length_penalty)
        texts = _texts(texts)
        rows = tokenize_rows(self.source_tokenizer, texts)
        blank = {i for i, t in enumerate(texts) if is_blank(t)}
        results = [[("", 0.0)] for _ in texts]
        for chunk in length_batches({i: len(row) for i, row in enumerate(rows) if i not in blank}, batch_size):
            source_ids = pad_source_rows([rows[i] for i in chunk], self.source_tokenizer, self.parts.max_length)
            tokens, scores = self._search(source_ids, sampler, max_length, num_hypotheses=n_best, with_scores=True)
            if n_best == 1:  # beam search returns `[B, L]` and `[B]` for one hypothesis
                tokens, scores = tokens[:, None], scores[:, None]
            strings = self._detokenize(tokens.reshape(-1, tokens.shape[-1]))
            for row, i in enumerate(chunk):
                results[i] = [(strings[row * n_best + h], float(scores[row, h])) for h in range(n_best)
                              if scores[row, h] > loop_ops.NEG / 2]
        return results

    def score(self, texts, translations, normalize=False, batch_size=32):
        """How likely the model finds each given translation of its text (forced decoding, one forward pass).

        Returns a list of dicts, one per pair: `tokens` (the translation's target tokens, the end token last; cut
        to the model's `max_length`), `token_scores` (each token's log-probability, as the decoders compute it)
        and `score` (their sum, or their mean when `normalize`). The score of a greedy translation is the greedy
        decoder's own log-probability for it.
        """
        self._one_pair_only("scoring")
        self._check_single_model("scoring")
        texts, translations = _texts(texts), _texts(translations)
        if len(texts) != len(translations):
            raise ValueError(f"{len(texts)} texts but {len(translations)} translations: give one translation per text")
        start, end = self.target_tokenizer.start_id, self.target_tokenizer.end_id
        rule = getattr(self.decoding, "length_penalty_rule", "gnmt")
        sources = tokenize_rows(self.source_tokenizer, texts)
        targets = [[int(t) for t in row[: self.parts.max_length - 1]] + [end]
                   for row in tokenize_rows(self.target_tokenizer, translations)]
        results = [None] * len(texts)
        for chunk in length_batches([len(row) for row in sources], batch_size):
            source_ids = pad_source_rows([sources[i] for i in chunk], self.source_tokenizer, self.parts.max_length)
            width = max(len(targets[i]) for i in chunk)
            decoder_inputs = np.zeros((len(chunk), width), dtype="int32")
            for row, i in enumerate(chunk):
                decoder_inputs[row, : len(targets[i])] = [start] + targets[i][:-1]
            logits = self.model({"encoder_inputs": source_ids, "decoder_inputs": decoder_inputs}, training=False)
            log_probs = keras.ops.convert_to_numpy(next_token_log_probs(logits, start, rule))
            for row, i in enumerate(chunk):
                ids = targets[i]
                token_scores = [float(v) for v in log_probs[row, np.arange(len(ids)), ids]]
                total = float(np.sum(token_scores))
                results[i] = {"score": total / len(ids) if normalize else total, "token_scores": token_scores,
                              "tokens": self.target_tokenizer.tokens(ids)}
        return results

    def translate_with_prefix(self, texts, prefixes, beam_size=None, length_penalty=None, batch_size=32,
                              max_length=None):
        """Translations that begin with the given target prefixes (one per text; `""` for none).

        Each prefix is split into target tokens, which decoding takes first, whatever the model would choose;
        then it goes on as `translate` decodes (greedy or beam search; a forced token keeps its log-probability in
        the beam's score). The prefix comes back as the target tokenizer writes its tokens: verbatim for text the
        tokenizer round-trips. A prefix must leave room for one more token (`ValueError` otherwise).
        """
        self._one_pair_only("target prefixes")
        texts, prefixes = _texts(texts), _texts(prefixes)
        if len(texts) != len(prefixes):
            raise ValueError(f"{len(texts)} texts but {len(prefixes)} prefixes: give one prefix per text ('' for none)")
        limit = (max_length or self.max_length) - 1
        forced = [[int(t) for t in row] for row in tokenize_rows(self.target_tokenizer, prefixes)]
        for i, row in enumerate(forced):
            if len(row) > limit:
                raise ValueError(f"prefix {i} has {len(row)} tokens; at most {limit} (the output's max_length - 1)")
        sampler = self.decoding_sampler(beam_size, length_penalty)
        rows = tokenize_rows(self.source_tokenizer, texts)
        blank = {i for i, t in enumerate(texts) if is_blank(t) and not forced[i]}
        outputs = [""] * len(texts)
        for chunk in length_batches({i: len(row) for i, row in enumerate(rows) if i not in blank}, batch_size):
            source_ids = pad_source_rows([rows[i] for i in chunk], self.source_tokenizer, self.parts.max_length)
            # Every prefix padded to the longest one allowed: one compiled shape, whatever prefixes come in.
            prefix = np.zeros((len(chunk), max(1, limit)), dtype="int32")
            for row, i in enumerate(chunk):
                prefix[row, : len(forced[i])] = forced[i]
            tokens, _ = self._search(source_ids, sampler, max_length, prefix=prefix)
            for i, text in zip(chunk, self._detokenize(tokens)):
                outputs[i] = text
        return outputs

    def align(self, texts, beam_size=None, length_penalty=None, batch_size=32, max_length=None, layer_index=-1):
        """Translations with word alignments: a list of `(translation, pairs)`, `pairs` a list of `(i, j)` (source
        word i, target word j; words are the texts split at spaces, counted from 0), one pair per target word.

        A target word is aligned to the source word that its tokens attend to most in cross-attention layer
        `layer_index` (default the last), averaged over the heads, the attention of the step that chose each
        token (as OpenNMT and Marian report alignments). Decoding is `translate`'s.
        """
        self._one_pair_only("alignments")
        self._check_single_model("alignment")
        sampler = self.decoding_sampler(beam_size, length_penalty)
        texts = _texts(texts)
        rows = tokenize_rows(self.source_tokenizer, texts)
        blank = {i for i, t in enumerate(texts) if is_blank(t)}
        results = [("", [])] * len(texts)
        end = self.target_tokenizer.end_id
        for chunk in length_batches({i: len(row) for i, row in enumerate(rows) if i not in blank}, batch_size):
            source_ids = pad_source_rows([rows[i] for i in chunk], self.source_tokenizer, self.parts.max_length)
            tokens, _ = self._search(source_ids, sampler, max_length)
            translations = self._detokenize(tokens)
            decoder_inputs = np.zeros_like(tokens)
            decoder_inputs[:, 0] = self.target_tokenizer.start_id
            decoder_inputs[:, 1:] = tokens[:, :-1]
            weights = self.parts.cross_attention_weights(source_ids, decoder_inputs, layer_index)
            weights = keras.ops.convert_to_numpy(keras.ops.mean(keras.ops.cast(weights, "float32"), axis=1))
            for row, i in enumerate(chunk):
                content = [int(t) for t in tokens[row] if t not in (0, end)]
                source = rows[i][: source_ids.shape[1] - 2]
                source_words = piece_words(texts[i], self.source_tokenizer.tokens(source))
                target_words = piece_words(translations[row], self.target_tokenizer.tokens(content))
                attention = weights[row, : len(content), 1: 1 + len(source)]
                results[i] = (translations[row], align_words(attention, source_words, target_words))
        return results

    def stream(self, text, max_length=None, sampler=None):
        """The translation of `text` in pieces, yielded as decoding goes (a generator).

        Decodes greedily (the default) or with a sampling sampler (`"top_k"`, a `TopKSampler`, ...), one step per
        token with key/value caches; a piece is yielded once the words in it can no longer change (text up to a
        space), and the rest at the end. The pieces join to the translation that `translate(beam_size=1)` (or
        the sampler with its seed) gives.
        """
        self._one_pair_only("streaming")
        sampler = GreedySampler() if sampler is None else get_sampler(sampler)
        if not isinstance(sampler, (GreedySampler, StochasticSampler)):
            raise ValueError(f"streaming decodes greedily or by sampling, not with {type(sampler).__name__}")
        text = _texts([text])[0]
        if is_blank(text):
            return iter(())
        source_ids = encode_sources(self.source_tokenizer, [text], self.parts.max_length)
        return stream_translation(self.parts, source_ids, self.target_tokenizer.start_id,
                                  self.target_tokenizer.end_id, max_length or self.max_length, sampler,
                                  self._detokenize)

    def translate(self, texts, beam_size=None, length_penalty=None, batch_size=32, max_length=None, verbose=0,
                  source_language=None, target_language=None):
        """Translates a list of sentences; returns a list of strings in the same order.

        Args:
            texts: Python strings (or UTF-8 bytes).
            beam_size: 1 greedy, more for beam search; `None` as `decoding` says (else greedy).
            length_penalty: the exponent of beam search's length penalty (GNMT's alpha, or transformers' with
                `decoding`'s `length_penalty_rule`); `None` as `decoding` says, else `BeamSampler`'s 0.6
                (`keras-transformer tune` chooses one on a held-out set).
            batch_size: sentences decoded together, sorted by length. More sentences than that decode greedy and
                beam search in a `SlotEngine` of `batch_size` slots, where a finished sentence leaves its slot for
                the next (the same translations; `slot_translation`).
            max_length: most output tokens; default the translator's.
            verbose: 0 quiet, 1 a progress bar.
            source_language: a multilingual model's source language code (`"deu_Latn"`), one or one per text;
                `None` the model's default (see `keras_transformer.decoding.languages`).
            target_language: its target language code(s), the same way.
        """
        sampler = self.decoding_sampler(beam_size, length_penalty)
        return self.translate_with_sampler(texts, sampler, batch_size, max_length, verbose, source_language,
                                           target_language)

    def translate_with_sampler(self, texts, sampler, batch_size=32, max_length=None, verbose=0, source_language=None,
                               target_language=None):
        """`translate` with any `keras_transformer.decoding.samplers` sampler (an object, a name or a config dict)."""
        import keras

        batch_size = arguments.check_positive_int("batch_size", batch_size)
        sampler = get_sampler(sampler)
        texts = _texts(texts)
        outputs = [""] * len(texts)
        # Blank as the exported graph sees it (FastWordpiece's whitespace), so both give the same outputs.
        todo = [i for i, t in enumerate(texts) if not is_blank(t)]
        rows = dict(zip(todo, tokenize_rows(self.source_tokenizer, [texts[i] for i in todo])))  # tokenized once
        batches = length_batches({i: len(rows[i]) for i in todo}, batch_size)
        order = [i for chunk in batches for i in chunk]
        progress = keras.utils.Progbar(len(order), unit_name="sentence") if verbose and order else None
        if languages.is_multilingual(self.target_tokenizer) or source_language or target_language:
            for i, text in zip(todo, languages.translate_into(self, texts, todo, [rows[i] for i in todo], sampler, (
                    source_language, target_language), batch_size, max_length, progress and progress.add)):
                outputs[i] = text
            return outputs
        if slot_translation.uses_slots(self, sampler, len(order), batch_size):  # a finished row leaves its slot
            engine = slot_translation.engine_for(self, sampler, batch_size, max_length or self.max_length)
            sources = pad_source_rows([rows[i] for i in order], self.source_tokenizer, self.parts.max_length)
            tokens = slot_translation.decode_in_slots(engine, sources, progress and progress.add)
            for i, text in zip(order, self._detokenize(tokens)):
                outputs[i] = text
            return outputs
        for chunk in batches:
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
        return plot_cross_attention(self, text, path, beam_size, layer_index)
