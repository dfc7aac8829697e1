"""`ServedModel`: one translator behind the protocol's signatures, answering a batch of rows of one signature.

Every request has a bounded cost: `n_best` at most `max_n_best` (decoded at one beam width), at most
`max_decode_rows` decoder rows per compiled call, prefixes checked before they are queued, and a translator that
compiles decodes in a fixed set of shapes (`batch_shapes`), which `serving.server.warm_up` compiles in advance.
"""

from keras_transformer.decoding.base_translator import translate_in_batches
from keras_transformer.decoding.languages import unknown_code_error
from keras_transformer.decoding.slot_engine import DEFAULT_SOURCE_BUCKETS
from keras_transformer.decoding.translator import Translator
from keras_transformer.decoding.translator import tokenize_rows
from keras_transformer.serving.protocol import SIGNATURES
from keras_transformer.serving.protocol import RequestError


def alignment_text(pairs):
    """`"i-j i-j ..."` (Pharaoh format: source word i, target word j) from `(i, j)` pairs."""
    return " ".join(f"{i}-{j}" for i, j in pairs)


class ServedModel:
    """A translator (`keras_transformer.load_translator`) with a name, the signatures it answers, and its decoding.

    Args:
        translator: a `BaseTranslator`.
        name: the model name in `/v1/models/NAME`.
        decoding: `translate` keywords every request decodes with (`beam_size`, `length_penalty`, `max_length`).
        batch_size: sentences the translator decodes together (the engine's slots).
        continuous: decode `serving_default` in a `SlotEngine` (continuous batching; default) where the translator
            allows it: `engine` is then that engine, else `None` and `engine_note` says why.
        steps_per_call: tokens the engine advances per compiled call.
        source_language, target_language: a multilingual model's default codes for requests that give none
            (`None`: the model's own default, if it has one).
        signatures: the signature names served (`None`: all the translator answers).
        max_n_best: the largest `n_best` (every `n_best` request decodes this many hypotheses).
        max_decode_rows: the most decoder rows (sentences x beam width) in one compiled call.
        max_request_tokens: the most token rows a request may cost (`check`); `None`: no limit.

    A multilingual model (M2M-100, NLLB-200) answers `serving_default`, whose sentences each take an optional
    `source_language` and `target_language`; sentences into different languages decode in one batch.
    """

    def __init__(self, translator, name, decoding=None, batch_size=32, continuous=True, steps_per_call=8,
                 source_language=None, target_language=None, signatures=("serving_default",), max_n_best=4,
                 max_decode_rows=128, max_request_tokens=None):
        from keras_transformer.serving.continuous import engine_for

        self.translator, self.name = translator, name
        self.decoding = {k: v for k, v in (decoding or {}).items() if v is not None}
        self.batch_size = batch_size
        self.languages = tuple(getattr(translator, "languages", ()) or ())
        self.default_languages = self._defaults(source_language, target_language)
        if self.languages:
            answered = {"serving_default": SIGNATURES["serving_default"].with_languages()}
        else:
            answered = {n: s for n, s in SIGNATURES.items() if translator.supports(s.translator_method)}
        unknown = [n for n in signatures or () if n not in answered]
        if unknown:
            raise ValueError(f"--signatures: {type(translator).__name__} does not answer {unknown[0]!r}; it answers "
                             f"{', '.join(answered)}")
        self.signatures = {n: s for n, s in answered.items() if signatures is None or n in signatures}
        self.max_n_best, self.max_decode_rows, self.max_request_tokens = max_n_best, max_decode_rows, max_request_tokens
        self.sentences_per_call = {n: self._sentences_per_call(n) for n in self.signatures}
        self.engine, self.engine_note = (engine_for(translator, self.decoding, batch_size, steps_per_call) if continuous
                                         else (None, "--batching static"))
        self.batch_shapes = self._fix_shapes()

    def beam_width(self, signature):
        """Decoder rows per sentence of `signature`: the decoding's beam (`n_best`: at least `max_n_best`)."""
        beam = self.decoding.get("beam_size") or getattr(getattr(self.translator, "decoding", None), "beam_size",
                                                         None) or 1
        return max(beam, self.max_n_best) if signature == "n_best" else 1 if signature == "score" else beam

    def _sentences_per_call(self, signature):
        width = self.beam_width(signature)
        if width > self.max_decode_rows:
            raise ValueError(f"--max-decode-rows {self.max_decode_rows} is below the beam width {width} of "
                             f"{signature} (beam size, or --max-n-best): one sentence would not fit")
        return max(1, min(self.batch_size, self.max_decode_rows // width))

    def _fix_shapes(self):
        """`{signature: [(rows, source width), ...]}`: the shapes each batch-at-a-time signature decodes in, fixed
        on a translator that compiles per shape (`Translator.fix_shapes`); `{}` for one that does not."""
        translator = self.translator
        if not hasattr(translator, "fix_shapes") or not getattr(translator, "jit_compile", False):
            return {}
        longest = -(-int(translator.parts.max_length) // 8) * 8
        widths = [b for b in DEFAULT_SOURCE_BUCKETS if b < longest] + [longest]
        counts = set(self.sentences_per_call.values())
        rows = sorted({4 ** i for i in range(8) if 4 ** i < max(counts)} | counts)
        translator.fix_shapes(rows, widths)
        static = [n for n in self.signatures if n != "score" and not (n == "serving_default" and self.engine)]
        return {n: [(r, w) for w in widths for r in rows if r <= self.sentences_per_call[n]] for n in static}

    def check(self, request):
        """Refuses (`RequestError`) what a request asks beyond this server's limits, before it is queued: `n_best`
        over `max_n_best`, a prefix longer than the output, a cost over `max_request_tokens` (its sentences' source
        tokens plus the output's `max_length`, times the beam width; a translator of a run, whose tokenizer reads
        the texts here)."""
        options = dict(request.options)
        if options.get("n_best", 0) > self.max_n_best:
            raise RequestError(f"n_best {options['n_best']}: at most {self.max_n_best} on this server "
                               "(--max-n-best)")
        if self.max_request_tokens and isinstance(self.translator, Translator) and request.rows:
            self._check_cost([row[0] for row in request.rows], self.beam_width(request.signature.name))
        if request.signature.name == "translate_with_prefix" and isinstance(self.translator, Translator):
            limit = (self.decoding.get("max_length") or self.translator.max_length) - 1
            prefixes = tokenize_rows(self.translator.target_tokenizer, [row[1] for row in request.rows])
            for index, length in enumerate(len(row) for row in prefixes):
                if length > limit:
                    raise RequestError(f"instances[{index}].prefix has {length} tokens; at most {limit} (the "
                                       "output's max_length - 1)")

    def _check_cost(self, texts, width):
        """A `RequestError` (413) for texts whose source tokens plus output tokens, times the beam width, exceed
        `max_request_tokens`. Bounds first, so that the check never costs much itself: a text has at most twice
        its characters in tokens (a SentencePiece word may start with a lone word-start piece) and at least its
        words; only a request between the bounds is tokenized, a few texts at a time, until it is over."""
        t, limit = self.translator, self.max_request_tokens
        longest, output = t.parts.max_length, self.decoding.get("max_length") or t.max_length

        def cost(lengths):
            return width * sum(min(length + 2, longest) + output for length in lengths)

        if cost(2 * len(text) for text in texts) <= limit:
            return
        total, counted = cost(len(text.split()) for text in texts), 0
        while total <= limit and counted < len(texts):  # between the bounds: tokens, 16 texts at a time
            chunk = texts[counted: counted + 16]
            total += cost(len(row) for row in tokenize_rows(t.source_tokenizer, chunk)) - cost(
                len(text.split()) for text in chunk)
            counted += len(chunk)
        if total > limit:
            raise RequestError(f"this request costs at least {total:,} token rows ({len(texts)} sentences' source "
                               f"and output tokens x beam width {width}); at most {limit:,} "
                               "(--max-request-tokens): split it into smaller requests", 413)

    def metadata(self):
        """TF Serving's `GET /v1/models/NAME/metadata` answer."""
        return {"model_spec": {"name": self.name, "signature_name": "", "version": "1"},
                "metadata": {"signature_def": {"signature_def": {
                    n: s.metadata() for n, s in self.signatures.items()}}}}

    def _defaults(self, source, target):
        """The `(source, target)` codes of sentences that give none: the flags', else the model's."""
        if not self.languages:
            if source is not None or target is not None:
                flag = "--source-lang" if source is not None else "--target-lang"
                raise ValueError(f"{flag}: this model translates one language pair; languages are chosen for "
                                 "multilingual models only (M2M-100, NLLB-200)")
            return None, None
        own = getattr(self.translator, "default_languages", (None, None))
        for code, flag in ((source, "--source-lang"), (target, "--target-lang")):
            if code is not None and code not in self.languages:
                raise unknown_code_error(code, self.languages, flag)
        return (own[0] if source is None else source), (own[1] if target is None else target)

    def with_languages(self, rows):
        """A multilingual model's `serving_default` rows `(text, source, target)` with every code filled in (the
        defaults where a sentence gave none) and checked; other rows unchanged. `RequestError` names the sentence
        and the closest valid codes."""
        if not self.languages:
            return rows
        known, filled = set(self.languages), []
        for index, (text, *codes) in enumerate(rows):
            for which, (name, flag) in enumerate((("source_language", "--source-lang"),
                                                  ("target_language", "--target-lang"))):
                code = self.default_languages[which] if codes[which] is None else codes[which]
                if code is None:
                    raise RequestError(f"sentence {index}: {name} is required (this model translates between "
                                       f"{len(self.languages)} languages, codes such as "
                                       f"{', '.join(self.languages[:3])}); give it, or start the server with {flag}")
                if code not in known:
                    raise RequestError(str(unknown_code_error(code, self.languages, f"sentence {index}: {name}")))
                codes[which] = code
            filled.append((text, *codes))
        return tuple(filled)

    def example_row(self, text):
        """A `serving_default` row of `text` (warm-up), with language codes where the model takes them."""
        if not self.languages:
            return (text,)
        return (text, self.default_languages[0] or self.languages[0], self.default_languages[1] or self.languages[0])

    def stream(self, text):
        """The translation of `text` in pieces, as the translator decides its tokens (`BaseTranslator.stream`)."""
        return self.translator.stream(text, max_length=self.decoding.get("max_length"))

    def run(self, key, rows):
        """One result dict (the signature's outputs) per row: the batch a `Batcher` hands over."""
        name, options = key
        options = dict(options)
        texts = [row[0] for row in rows]
        t = self.translator
        size = self.sentences_per_call.get(name, self.batch_size)
        if name == "serving_default":
            languages = {}
            if self.languages:  # rows checked by `with_languages`
                languages = {"source_language": [row[1] for row in rows], "target_language": [row[2] for row in rows]}
            # At most `size` sentences per call, similar lengths together: never more rows than the fixed shapes
            # hold (a translator given more than `batch_size` sentences would decode them in a `SlotEngine`).
            return [{"translation": s} for s in translate_in_batches(
                texts, size, 0, lambda chunk, *codes: t.translate(
                    [text.decode("utf-8") for text in chunk], batch_size=size, **self.decoding,
                    **dict(zip(languages, codes))), columns=list(languages.values()))]
        if name == "n_best":  # one beam width for every request: the first `n_best` of `max_n_best` hypotheses
            lists = t.translate_n_best(texts, self.max_n_best, batch_size=size, **self.decoding)
            return [{"translations": [h for h, _ in hyps[: options["n_best"]]],
                     "scores": [s for _, s in hyps[: options["n_best"]]]} for hyps in lists]
        if name == "score":
            return t.score(texts, [row[1] for row in rows], normalize=options["normalize"], batch_size=size)
        if name == "translate_with_prefix":
            return [{"translation": s} for s in t.translate_with_prefix(
                texts, [row[1] for row in rows], batch_size=size, **self.decoding)]
        if name == "align":
            return [{"translation": s, "alignment": alignment_text(pairs)}
                    for s, pairs in t.align(texts, batch_size=size, **self.decoding)]
        raise ValueError(f"unknown signature {name!r}")
