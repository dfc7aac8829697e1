"""`ServedModel`: one translator behind the protocol's signatures, answering a batch of rows of one signature."""

from keras_transformer.decoding.languages import unknown_code_error
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

    A multilingual model (M2M-100, NLLB-200) answers `serving_default`, whose sentences each take an optional
    `source_language` and `target_language`; sentences into different languages decode in one batch.
    """

    def __init__(self, translator, name, decoding=None, batch_size=32, continuous=True, steps_per_call=8,
                 source_language=None, target_language=None):
        from keras_transformer.serving.continuous import engine_for

        self.translator, self.name = translator, name
        self.decoding = {k: v for k, v in (decoding or {}).items() if v is not None}
        self.batch_size = batch_size
        self.languages = tuple(getattr(translator, "languages", ()) or ())
        self.default_languages = self._defaults(source_language, target_language)
        if self.languages:
            self.signatures = {"serving_default": SIGNATURES["serving_default"].with_languages()}
        else:
            self.signatures = {n: s for n, s in SIGNATURES.items() if translator.supports(s.translator_method)}
        self.engine, self.engine_note = (engine_for(translator, self.decoding, batch_size, steps_per_call) if continuous
                                         else (None, "--batching static"))

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
        if name == "serving_default":
            languages = {}
            if self.languages:  # rows checked by `with_languages`
                languages = {"source_language": [row[1] for row in rows], "target_language": [row[2] for row in rows]}
            return [{"translation": s} for s in t.translate(texts, batch_size=self.batch_size, **self.decoding,
                                                             **languages)]
        if name == "n_best":
            lists = t.translate_n_best(texts, options["n_best"], batch_size=self.batch_size, **self.decoding)
            return [{"translations": [h for h, _ in hyps], "scores": [s for _, s in hyps]} for hyps in lists]
        if name == "score":
            return t.score(texts, [row[1] for row in rows], normalize=options["normalize"],
                           batch_size=self.batch_size)
        if name == "translate_with_prefix":
            return [{"translation": s} for s in t.translate_with_prefix(
                texts, [row[1] for row in rows], batch_size=self.batch_size, **self.decoding)]
        if name == "align":
            return [{"translation": s, "alignment": alignment_text(pairs)}
                    for s, pairs in t.align(texts, batch_size=self.batch_size, **self.decoding)]
        raise ValueError(f"unknown signature {name!r}")
