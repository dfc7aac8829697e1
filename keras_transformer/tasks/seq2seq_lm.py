"""`TransformerSeq2SeqLM`: translation as a keras-hub `Seq2SeqLM` task.

keras-hub's API works on it as on its own models:

* `keras_hub.models.Seq2SeqLM.from_preset(dir)` loads a preset that `keras-transformer export RUN --preset DIR`
  (or `save_to_preset`) wrote, once `keras_transformer` is imported (importing it registers the classes);
* `fit(x=(sources, targets))` trains on raw strings through the `TransformerSeq2SeqLMPreprocessor`;
* `generate(text)` translates: with the package's samplers (`keras_transformer.decoding.samplers`, the default
  `GreedySampler`, and `BeamSampler` with the GNMT length penalty) it runs the package's KV-cached decoders; with
  keras-hub's own samplers (`"greedy"`, `"top_k"`, `"beam"`, ...) it runs keras-hub's sampling loop over
  `call_with_cache`, one cached decoder step per token;
* `backbone.enable_lora(rank)`, `quantize("int8")`, `save_to_preset(dir)` and `keras_hub.upload_preset(uri, dir)`.

It is also a translator of the package (`translate`, `translate_n_best`, `score`, ... as `load_translator` returns
for a run), decoding with the compiled decoders of `keras_transformer.decoding.Translator`.
"""

import os

import keras
import keras_hub
from keras import ops

from keras_transformer.atomic import atomic_path
from keras_transformer.decoding import compiled_decoders
from keras_transformer.decoding import loop_ops
from keras_transformer.decoding import samplers as our_samplers
from keras_transformer.decoding.base_translator import BaseTranslator
from keras_transformer.decoding.beam_search import beam_search_with_parts
from keras_transformer.decoding.greedy import decode_token_by_token
from keras_transformer.decoding.greedy import greedy_search
from keras_transformer.decoding.lru import LRUCache
from keras_transformer.decoding.sampling import sampling_choice
from keras_transformer.decoding.translator import Translator
from keras_transformer.decoding.translator import sampler_for
from keras_transformer.models import TransformerParts
from keras_transformer.models.backbone import TransformerBackbone
from keras_transformer.tasks.preprocessor import TransformerSeq2SeqLMPreprocessor
from keras_transformer.tasks.presets import OLD_LAYOUT_FIX
from keras_transformer.tasks.presets import PresetError
from keras_transformer.tasks.presets import check_generation_limits
from keras_transformer.tasks.presets import check_preset
from keras_transformer.tasks.presets import imported_run
from keras_transformer.tasks.presets import is_checkpoint
from keras_transformer.tasks.presets import named_preset
from keras_transformer.tasks.tokenizer import TransformerTokenizer


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerSeq2SeqLM(keras_hub.models.Seq2SeqLM, BaseTranslator):
    """An encoder-decoder Transformer with its preprocessor: `fit` on strings, `generate`, presets.

    Args:
        backbone: a `TransformerBackbone`.
        preprocessor: a `TransformerSeq2SeqLMPreprocessor`, or `None` (then `fit` and `generate` take ids).
        sampler: how `generate()` decodes until `compile(sampler=...)` says otherwise: a name, a keras-hub sampler
            or one of the package's (default: the package's `GreedySampler`).

    Example (`run_dir` is a directory written by `train`, `tmp` an empty directory):

    >>> task = TransformerSeq2SeqLM.from_run(run_dir)
    >>> path = task.save_to_preset(os.path.join(tmp, "dates-preset"))
    >>> loaded = keras_hub.models.Seq2SeqLM.from_preset(path)
    >>> sentence = "the first of May, nineteen ninety-nine"
    >>> loaded.generate(sentence) == task.generate(sentence)
    True
    """

    backbone_cls = TransformerBackbone
    preprocessor_cls = TransformerSeq2SeqLMPreprocessor

    def __init__(self, backbone, preprocessor=None, sampler=None, **kwargs):
        self.backbone = backbone
        self.preprocessor = preprocessor
        kwargs.setdefault("compile", False)
        inputs = backbone.input
        super().__init__(inputs=inputs, outputs=backbone(inputs), **kwargs)
        self.compile(sampler=sampler if sampler is not None else our_samplers.GreedySampler())

    def compile(self, optimizer="auto", loss="auto", *, weighted_metrics="auto", sampler=None, **kwargs):
        """keras-hub's `compile`; `optimizer="auto"` is Adam at 1e-4 (fine-tuning a translation model), and
        `sampler=None` keeps the task's sampler (the package's `GreedySampler` at first), so that compiling for
        training does not change how `generate()` decodes."""
        if sampler is None:
            sampler = getattr(self, "sampler", None) or our_samplers.GreedySampler()
        if optimizer == "auto":
            optimizer = keras.optimizers.Adam(1e-4)
        if isinstance(sampler, dict) and not str(sampler.get("module", "")).startswith("keras_hub") and sampler.get(
                "class_name") in {c.__name__ for c in our_samplers.SAMPLERS.values()}:
            sampler = our_samplers.get_sampler(sampler)  # a preset's sampler of this package's (else keras-hub's)
        super().compile(optimizer=optimizer, loss=loss, weighted_metrics=weighted_metrics, sampler=sampler, **kwargs)
        object.__setattr__(self, "_translator", None)

    # ------------------------------------------------------------------------------------------------------------
    # Construction.

    @classmethod
    def from_run(cls, run, sequence_length=None, **kwargs):
        """The task of a `Run` or of a run directory written by `train` (or `import`); its decoding settings
        (`decoding.json`) become the default sampler."""
        if isinstance(run, (str, os.PathLike)):
            from keras_transformer.runs.run import load_run

            run = load_run(run)
        source = TransformerTokenizer(run.source_tokenizer)
        target = None
        if run.target_tokenizer is not run.source_tokenizer:
            target = TransformerTokenizer(run.target_tokenizer, config_file="target_tokenizer.json")
        decoding_length = getattr(getattr(run, "decoding", None), "max_length", None)
        length = sequence_length or decoding_length or run.model.get_config()["max_length"]
        preprocessor = TransformerSeq2SeqLMPreprocessor(source, target, encoder_sequence_length=length,
                                                        decoder_sequence_length=length)
        kwargs.setdefault("sampler", sampler_for(getattr(run, "decoding", None)))
        return cls(TransformerBackbone.from_model(run.model), preprocessor, **kwargs)

    @classmethod
    def from_preset(cls, preset, load_weights=True, **kwargs):
        """keras-hub's `from_preset`, plus a pretrained checkpoint (OPUS-MT, M2M-100, NLLB-200): `hf://OWNER/NAME`,
        a directory in the Hugging Face layout, or a name (`"nllb_200_distilled_600m"`, `"m2m100_418m"`,
        `"opus_mt_de_en"`: `presets.NAMED_PRESETS`), imported once into a cache and loaded from there.

        Raises:
            PresetError: a preset of an older layout (one line says how to re-export it), or a damaged one.
        """
        preset = named_preset(preset) or preset
        if is_checkpoint(preset):
            return cls.from_run(imported_run(os.fspath(preset)), **kwargs)
        check_preset(os.fspath(preset))
        return super().from_preset(os.fspath(preset), load_weights=load_weights, **kwargs)

    def save_to_preset(self, preset_dir, max_shard_size=10, overwrite=False):
        """keras-hub's `save_to_preset`, written to a temporary directory and renamed into place; returns the path.

        Raises:
            FileExistsError: `preset_dir` exists and `overwrite` is not set.
        """
        if os.path.lexists(preset_dir) and not overwrite:
            raise FileExistsError(f"{preset_dir}: exists; pass overwrite=True (--overwrite) to replace it")
        with atomic_path(preset_dir) as temporary:
            super().save_to_preset(temporary, max_shard_size=max_shard_size)
        return preset_dir

    def get_config(self):
        """keras-hub's task config plus the sampler `generate()` decodes with (a preset keeps it)."""
        config = super().get_config()
        if isinstance(self.sampler, our_samplers.Sampler):
            config["sampler"] = our_samplers.serialize_sampler(self.sampler)
        else:
            config["sampler"] = keras_hub.samplers.serialize(self.sampler)
        return config

    @classmethod
    def from_config(cls, config):
        if "backbone" not in config and "model" in config:
            raise PresetError(f"task.json: a preset of an older keras-transformer layout; {OLD_LAYOUT_FIX}")
        check_generation_limits(config)
        return super().from_config(dict(config))

    # ------------------------------------------------------------------------------------------------------------
    # Generation.

    def _parts(self):
        return TransformerParts.from_model(self.backbone)

    def generate_step(self, inputs, stop_token_ids=None):
        """One batch: `{"encoder_inputs", "decoder_token_ids", "decoder_padding_mask"}` -> the same prompt keys,
        filled in (`[START]` first)."""
        encoder_inputs = ops.cast(inputs["encoder_inputs"], "int32")
        prompt = ops.cast(inputs["decoder_token_ids"], "int32")
        mask = ops.cast(inputs["decoder_padding_mask"], "bool")
        start, end = self._special_ids()
        if isinstance(self.sampler, our_samplers.Sampler):
            length = prompt.shape[1] - 1
            prefix = ops.where(mask[:, 1:], prompt[:, 1:], 0)
            # A multilingual model's target language (the prompt's first token after `[START]`) costs nothing in
            # beam scores, as transformers' `forced_bos_token_id`.
            first = prompt[:, 1] if self.preprocessor is not None and self.preprocessor.multilingual else None
            tokens = self._our_decode(encoder_inputs, length, start, end, prefix, first)
            token_ids = ops.concatenate([prompt[:, :1], ops.cast(tokens, "int32")], axis=1)
            return {"decoder_token_ids": token_ids, "decoder_padding_mask": ops.not_equal(token_ids, 0)}
        token_ids = self._keras_hub_decode(encoder_inputs, prompt, mask, start, stop_token_ids)
        if stop_token_ids is None:
            return {"decoder_token_ids": token_ids, "decoder_padding_mask": ops.ones_like(token_ids, dtype="bool")}
        stops = ops.zeros_like(token_ids, dtype="bool")
        for stop in stop_token_ids:
            stops = ops.logical_or(stops, ops.equal(token_ids, stop))
        stops = ops.cast(ops.logical_and(stops, ops.logical_not(mask)), "int32")
        after = ops.cumsum(stops, axis=-1) - stops  # ends before this position
        return {"decoder_token_ids": token_ids, "decoder_padding_mask": ops.equal(after, 0)}

    def _special_ids(self):
        if self.preprocessor is None:
            return 2, 3
        target = self.preprocessor.target
        return target.start_token_id, target.end_token_id

    def _our_decode(self, encoder_inputs, length, start, end, prefix, first_token=None):
        """The package's KV-cached decoder for the package's sampler, at full width (keras-hub's generate
        function compiles it)."""
        sampler, parts = self.sampler, self._parts()
        if isinstance(sampler, our_samplers.BeamSampler):
            tokens, _ = beam_search_with_parts(
                parts, encoder_inputs, length, start, end, beam_size=sampler.num_beams,
                length_penalty=sampler.length_penalty, length_penalty_rule=sampler.length_penalty_rule,
                force_end=sampler.force_end, prefix=prefix, first_token=first_token)
            return tokens
        if isinstance(sampler, our_samplers.GreedySampler):
            return greedy_search(parts, encoder_inputs, length, start, end, force_end=sampler.force_end,
                                 prefix=prefix)
        # A seed draws the same numbers every call (as `decode` does); without one, keras-hub's seed generator
        # (a sampler variable that its compiled generate function carries) moves on with each call.
        seed = sampler.seed if sampler.seed is not None else sampler.seed_generator
        uniforms = keras.random.uniform((ops.shape(encoder_inputs)[0], length), minval=1e-7, maxval=1.0, seed=seed)
        filters = sampler._filters()
        choose = sampling_choice(parts.vocab_size, uniforms, sampler.temperature, filters.get("top_k"),
                              filters.get("top_p"))
        return decode_token_by_token(parts, encoder_inputs, length, start, end, choose, prefix=prefix)

    def _keras_hub_decode(self, encoder_inputs, prompt, mask, start, stop_token_ids):
        """keras-hub's sampling loop: `next(prompt, cache, index)` runs one cached decoder step for position
        `index - 1`. The loop starts at position 1, so a longer prompt is read one forced token per step."""
        parts = self._parts()
        with loop_ops.weights_read_once(parts):
            parts = parts.with_loop_invariants()
            encoded, padding_mask = parts.encode(encoder_inputs)
            cache = (parts.empty_self_attention_caches(ops.shape(prompt)[0], prompt.shape[1]),
                     parts.cross_attention_caches(encoded), padding_mask)
            bias = loop_ops.padding_bias(parts.vocab_size, start)

            def next(prompt, cache, index):
                self_caches, cross_caches, padding_mask = cache
                token = ops.slice(prompt, [0, index - 1], [ops.shape(prompt)[0], 1])
                logits, self_caches = parts.decode_step(token, index - 1, self_caches, cross_caches, padding_mask)
                return logits[:, 0, :] + bias, None, (self_caches, cross_caches, padding_mask)

            return self.sampler(next=next, prompt=prompt, cache=cache, index=1, mask=mask,
                                stop_token_ids=stop_token_ids, model=self)

    def make_generate_function(self):
        """keras-hub's compiled generate function, compiled with XLA on TensorFlow whatever the device (keras-hub
        leaves it to `jit_compile`, which Keras turns off on CPUs): the decoding loop is what XLA fuses best."""
        if self.generate_function is None and keras.config.backend() == "tensorflow" and not self.run_eagerly:
            import tensorflow as tf

            # One traced function per input shape (a new batch or source width is not a "retrace"), the most
            # recently used kept.
            functions = LRUCache()

            def generate_function(inputs, stop_token_ids=None):
                key = (tuple((name, tuple(value.shape)) for name, value in sorted(inputs.items())),
                       tuple(stop_token_ids or ()))
                function = functions.get(
                    key, lambda: tf.function(self.generate_step, jit_compile=True, autograph=False))
                return function(inputs, stop_token_ids=stop_token_ids)

            self.generate_function = generate_function
        return super().make_generate_function()

    def quantize(self, mode=None, config=None, filters=None, **kwargs):
        """keras-hub's `quantize` (`"int8"`: every Dense layer, the embeddings and the output projection); the
        preprocessor, which holds no weights, is built first so that Keras' walk over the layers passes it."""
        if self.preprocessor is not None and not self.preprocessor.built:
            self.preprocessor.build(None)
        return super().quantize(mode, config=config, filters=filters, **kwargs)

    def _post_quantize(self, mode, **kwargs):
        super()._post_quantize(mode, **kwargs)
        compiled_decoders.forget(self.backbone)
        object.__setattr__(self, "_translator", None)

    # ------------------------------------------------------------------------------------------------------------
    # The package's translator interface (what `load_translator` returns for a preset).

    @property
    def translator(self):
        """A `Translator` over the backbone and tokenizers (the package's batched, compiled decoding)."""
        if getattr(self, "_translator", None) is None:
            if self.preprocessor is None:
                raise ValueError("this TransformerSeq2SeqLM has no preprocessor: translating text needs its "
                                 "tokenizers")
            source = self.preprocessor.tokenizer.inner
            default = self.sampler if isinstance(self.sampler, our_samplers.Sampler) else None
            object.__setattr__(self, "_translator", Translator(
                self.backbone, source, self.preprocessor.target.inner,
                max_length=self.preprocessor.decoder_sequence_length, decoding=default))
        return self._translator

    def translate(self, texts, beam_size=None, length_penalty=None, batch_size=32, max_length=None, verbose=0,
                  source_language=None, target_language=None):
        """Translations of `texts` (a list of str), decoding as `compile(sampler=...)` set (greedy or beam search
        of the package) unless `beam_size`/`length_penalty` say otherwise."""
        sampler = sampler_for(self.translator.decoding, beam_size, length_penalty)
        return self.translator.translate_with_sampler(texts, sampler, batch_size=batch_size, max_length=max_length,
                                                      verbose=verbose, source_language=source_language,
                                                      target_language=target_language)

    def supports(self, method):
        return self.translator.supports(method)

    def translate_n_best(self, texts, n_best, **kwargs):
        return self.translator.translate_n_best(texts, n_best, **kwargs)

    def score(self, texts, translations, normalize=False, batch_size=32):
        return self.translator.score(texts, translations, normalize=normalize, batch_size=batch_size)

    def translate_with_prefix(self, texts, prefixes, **kwargs):
        return self.translator.translate_with_prefix(texts, prefixes, **kwargs)

    def align(self, texts, **kwargs):
        return self.translator.align(texts, **kwargs)

    def stream(self, text, max_length=None, sampler=None):
        return self.translator.stream(text, max_length=max_length, sampler=sampler)

    def plot_attention(self, text, path, beam_size=None, layer_index=-1):
        """A heat map of the cross-attention for one sentence (see `Translator.plot_attention`)."""
        return self.translator.plot_attention(text, path, beam_size=beam_size, layer_index=layer_index)
