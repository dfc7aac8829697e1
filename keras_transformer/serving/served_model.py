"""`ServedModel`: one translator behind the protocol's signatures, answering a batch of rows of one signature."""

from keras_transformer.serving.protocol import SIGNATURES


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
    """

    def __init__(self, translator, name, decoding=None, batch_size=32, continuous=True, steps_per_call=8):
        from keras_transformer.serving.continuous import engine_for

        self.translator, self.name = translator, name
        self.decoding = {k: v for k, v in (decoding or {}).items() if v is not None}
        self.batch_size = batch_size
        self.signatures = [n for n, s in SIGNATURES.items() if translator.supports(s.translator_method)]
        self.engine, self.engine_note = (engine_for(translator, self.decoding, batch_size, steps_per_call) if continuous
                                         else (None, "--batching static"))

    def metadata(self):
        """TF Serving's `GET /v1/models/NAME/metadata` answer."""
        return {"model_spec": {"name": self.name, "signature_name": "", "version": "1"},
                "metadata": {"signature_def": {"signature_def": {
                    n: SIGNATURES[n].metadata() for n in self.signatures}}}}

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
            return [{"translation": s} for s in t.translate(texts, batch_size=self.batch_size, **self.decoding)]
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
