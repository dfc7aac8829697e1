"""`CTranslate2Translator`: translates with a CTranslate2 directory written by `keras_transformer.export`, with
our tokenizers around CTranslate2's decoding. A multilingual model (M2M-100, NLLB-200) translates as CTranslate2's
guide says: the source starts with its language code, and the target language code is each row's `target_prefix`."""

import json
import os

import numpy as np

from keras_transformer.data.packing import pack_rows
from keras_transformer.data.tokenizers import load_tokenizer
from keras_transformer.data.words import is_blank
from keras_transformer.decoding import arguments
from keras_transformer.decoding.base_translator import BaseTranslator
from keras_transformer.decoding.beam_search import DEFAULT_LENGTH_PENALTY
from keras_transformer.decoding.languages import check_languages
from keras_transformer.decoding.languages import row_codes
from keras_transformer.export.ctranslate2_model import MARKER_FILE
from keras_transformer.export.ctranslate2_model import ctranslate2_module


class CTranslate2Translator(BaseTranslator):
    """Translates with a directory written by `export_ctranslate2`: our tokenizers, CTranslate2's decoding.

    The `translate` of every translator (`BaseTranslator`): `beam_size=None` decodes with the run's beam size at
    export (`decoding.json`, else greedy); `length_penalty` is CTranslate2's (a hypothesis scores
    `log_prob / length ** length_penalty`), 0.6 by default.

    Args:
        path: the directory.
        intra_threads: CPU threads per translation (0: CTranslate2's default).
        compute_type: CTranslate2's compute type (`"default"`: the saved weights' type).

    Example:

    >>> translator = CTranslate2Translator(ctranslate2_dir)  # written by `export_run(run_dir, ctranslate2=...)`
    >>> len(translator.translate(["the first of May, nineteen ninety-nine", ""]))
    2
    """

    def __init__(self, path, intra_threads=0, compute_type="default"):
        ctranslate2 = ctranslate2_module()
        self.translator = ctranslate2.Translator(path, device="cpu", intra_threads=intra_threads,
                                                 compute_type=compute_type)
        self.source_tokenizer = load_tokenizer(os.path.join(path, "tokenizers", "source"))
        target = os.path.join(path, "tokenizers", "target")
        self.target_tokenizer = load_tokenizer(target) if os.path.isdir(target) else self.source_tokenizer
        with open(os.path.join(path, MARKER_FILE), encoding="utf-8") as f:
            marker = json.load(f)
        self.max_length = int(marker["max_length"])
        # A translation that reaches max_length ends there: its last token is the end token, which detokenizing
        # drops, so decoding one token fewer gives the same text (for greedy decoding exactly).
        self.force_end = bool(marker.get("force_end", False))
        self.beam_size = int(marker.get("beam_size", 1))
        self._target_ids = {token: i for i, token in enumerate(self.target_tokenizer.vocab)}
        target = self.target_tokenizer
        self.languages = tuple(target.languages) if getattr(target, "languages", None) else ()
        if self.languages:
            self.default_languages = (self.source_tokenizer.source_language, target.target_language)

    def translate(self, texts, beam_size=None, length_penalty=None, batch_size=32, max_length=None, verbose=0,
                  source_language=None, target_language=None):
        """Translates a list of sentences; blank ones give '' (see the class for the decoding arguments).

        `verbose` is accepted for the common signature; CTranslate2 translates the whole list in one call. A
        multilingual export takes `source_language` / `target_language` (one code, or one per text): each source
        starts with its language's code and each target with its own (CTranslate2's `target_prefix`); any other
        export translates one language pair (both must be `None`).
        """
        if not self.languages:
            check_languages(None, None, source_language, target_language)
            results = self._translate(texts, beam_size, length_penalty, batch_size, max_length)
            return [self._text(r.hypotheses[0]) if r is not None else "" for r in results]
        count = len(texts)
        sources = row_codes(self.languages, source_language, count, self.default_languages[0], "source_language")
        targets = row_codes(self.languages, target_language, count, self.default_languages[1], "target_language")
        results = self._translate(texts, beam_size, length_penalty, batch_size, max_length, languages=(
            sources, targets))
        return [self._text(r.hypotheses[0]) if r is not None else "" for r in results]

    def _texts(self, texts):
        return [t if isinstance(t, str) else bytes(t).decode("utf-8", errors="replace") for t in texts]

    def _sources(self, texts, languages=None):
        """CTranslate2's source tokens (strings, `[START]` and `[END]` included) of each text; a multilingual model's
        start with each one's code in `languages`."""
        tokenizer = self.source_tokenizer
        rows = tokenizer.tokenize(list(texts)).to_list() if len(texts) else []
        if languages is not None:
            starts = [tokenizer.language_id(code) for code in languages]
            rows = [[start] + row for start, row in zip(starts, rows)]
        packed = pack_rows(rows, None if languages is not None else tokenizer.source_start_id, tokenizer.end_id,
                           self.max_length)
        vocab = tokenizer.vocab
        return [[vocab[i] for i in row if i != 0] for row in packed]

    def _targets(self, texts):
        """The target tokens (strings, no `[END]`) of each text."""
        rows = self.target_tokenizer.tokenize(list(texts)).to_list() if len(texts) else []
        return [[self.target_tokenizer.vocab[i] for i in row] for row in rows]

    def _text(self, tokens):
        """The detokenized text of target tokens (strings)."""
        ids = np.array([[self._target_ids[t] for t in tokens] or [0]], dtype="int32")
        return self.target_tokenizer.detokenize(ids).numpy()[0].decode("utf-8", errors="replace")

    def _translate(self, texts, beam_size, length_penalty, batch_size, max_length, prefixes=None, languages=None,
                   **options):
        """CTranslate2's `TranslationResult` of each text (`None` for a blank text without a prefix); `languages`:
        a multilingual model's `(source codes, target codes)`, one each per text."""
        beam_size = arguments.check_positive_int("beam_size", self.beam_size if beam_size is None else beam_size)
        batch_size = arguments.check_positive_int("batch_size", batch_size)
        if length_penalty is None:
            length_penalty = DEFAULT_LENGTH_PENALTY
        texts = self._texts(texts)
        todo = [i for i, t in enumerate(texts) if not is_blank(t) or prefixes is not None and prefixes[i]]
        results = [None] * len(texts)
        if not todo:
            return results
        vocab_out = self.target_tokenizer.vocab
        if prefixes is not None:
            options["target_prefix"] = [prefixes[i] for i in todo]
        source_codes = None
        if languages is not None:
            source_codes = [languages[0][i] for i in todo]
            target = self.target_tokenizer
            options["target_prefix"] = [[target.vocab[target.language_id(languages[1][i])]] for i in todo]
        found = self.translator.translate_batch(
            self._sources([texts[i] for i in todo], source_codes), beam_size=beam_size, max_batch_size=batch_size,
            max_decoding_length=max(1, (max_length or self.max_length) - self.force_end),
            suppress_sequences=[[vocab_out[self.target_tokenizer.pad_id]], [vocab_out[self.target_tokenizer.start_id]]],
            length_penalty=length_penalty if beam_size > 1 else 1.0,
            min_decoding_length=0, **options)  # CTranslate2's default (1) never lets a translation end at once
        for i, result in zip(todo, found):
            results[i] = result
        return results

    def translate_n_best(self, texts, n_best, beam_size=None, length_penalty=None, batch_size=32, max_length=None):
        """The `n_best` best translations of each text (`BaseTranslator.translate_n_best`), from CTranslate2's
        `num_hypotheses`; its scores are its own (log-probability over `length ** length_penalty`)."""
        self._one_pair_only("n-best lists")
        n_best = arguments.check_positive_int("n_best", n_best)
        beam_size = max(self.beam_size if beam_size is None else beam_size, n_best)
        results = self._translate(texts, beam_size, length_penalty, batch_size, max_length, num_hypotheses=n_best,
                                  return_scores=True)
        return [[("", 0.0)] if r is None else [(self._text(h), float(s)) for h, s in zip(r.hypotheses, r.scores)]
                for r in results]

    def score(self, texts, translations, normalize=False, batch_size=32):
        """The log-probability of given translations (`BaseTranslator.score`), from CTranslate2's `score_batch`."""
        self._one_pair_only("scoring")
        texts, translations = self._texts(texts), self._texts(translations)
        if len(texts) != len(translations):
            raise ValueError(f"{len(texts)} texts but {len(translations)} translations: give one translation per text")
        targets = [t[: self.max_length - 1] for t in self._targets(translations)]
        found = self.translator.score_batch(self._sources(texts), targets, max_batch_size=batch_size) if texts else []
        results = []
        for result in found:
            token_scores = [float(v) for v in result.log_probs]
            total = float(sum(token_scores))
            tokens = [self.target_tokenizer.vocab[self._target_ids[t]] if t in self._target_ids
                      else self.target_tokenizer.vocab[self.target_tokenizer.end_id] for t in result.tokens]
            results.append({"score": total / max(len(token_scores), 1) if normalize else total,
                            "token_scores": token_scores, "tokens": tokens})
        return results

    def translate_with_prefix(self, texts, prefixes, beam_size=None, length_penalty=None, batch_size=32,
                              max_length=None):
        """Translations forced through target prefixes (`BaseTranslator.translate_with_prefix`), from
        CTranslate2's `target_prefix`."""
        self._one_pair_only("target prefixes")
        texts, prefixes = self._texts(texts), self._texts(prefixes)
        if len(texts) != len(prefixes):
            raise ValueError(f"{len(texts)} texts but {len(prefixes)} prefixes: give one prefix per text ('' for none)")
        forced = self._targets(prefixes)
        limit = (max_length or self.max_length) - 1
        for i, row in enumerate(forced):
            if len(row) > limit:
                raise ValueError(f"prefix {i} has {len(row)} tokens; at most {limit} (the output's max_length - 1)")
        results = self._translate(texts, beam_size, length_penalty, batch_size, max_length, prefixes=forced)
        return [self._text(r.hypotheses[0]) if r is not None else "" for r in results]

    def stream(self, text, max_length=None, sampler=None):
        """The greedy translation of `text` in pieces (`BaseTranslator.stream`), from CTranslate2's
        `generate_tokens`; a piece is yielded once its words can no longer change."""
        self._one_pair_only("streaming")
        if sampler not in (None, "greedy"):
            raise ValueError("a CTranslate2 model streams greedy decoding only")
        (text,) = self._texts([text])
        if is_blank(text):
            return iter(())
        vocab_out = self.target_tokenizer.vocab
        steps = self.translator.generate_tokens(
            self._sources([text])[0], max_decoding_length=max(1, (max_length or self.max_length) - self.force_end),
            suppress_sequences=[[vocab_out[self.target_tokenizer.pad_id]], [vocab_out[self.target_tokenizer.start_id]]],
            min_decoding_length=0)

        def pieces():
            tokens, emitted = [], ""
            for step in steps:
                if step.token_id == self.target_tokenizer.end_id or step.is_last and step.token not in self._target_ids:
                    break
                tokens.append(step.token)
                decided = self._text(tokens)
                decided = decided[: decided.rfind(" ") + 1]  # the last word may still grow
                if len(decided) > len(emitted) and decided.startswith(emitted):
                    yield decided[len(emitted):]
                    emitted = decided
            final = self._text(tokens) if tokens else ""
            if final.startswith(emitted) and len(final) > len(emitted):
                yield final[len(emitted):]

        return pieces()
