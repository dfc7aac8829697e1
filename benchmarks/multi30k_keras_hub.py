"""The same-budget baseline of docs/quality.md: keras.io's "English-to-Spanish translation with KerasHub" model,
trained on Multi30k German->English for the minutes our recipe gets, then scored like ours on test2016.

    python benchmarks/multi30k_keras_hub.py --data DATA_DIR --output runs/keras_hub_baseline

The model and its training are the keras.io example's (Abheesht Sharma, 2022; last modified 2024-04-30), only
the data and the stopping rule change:
- text lowercased; one WordPiece vocabulary of up to 15,000 per language (`compute_word_piece_vocabulary`),
  sequences packed to 40 tokens (`StartEndPacker`), batches of 64;
- `TokenAndPositionEmbedding` (256) -> one `TransformerEncoder` (2048, 8 heads) -> one `TransformerDecoder` ->
  Dropout(0.5) -> Dense softmax; RMSprop, sparse categorical cross-entropy (padding included, as there);
- greedy decoding with `keras_hub.samplers.GreedySampler` re-running the model on the whole prefix (as there),
  plus beam 4 (`BeamSampler`) for the beam-4 row;
- training stops when another epoch would overrun `--max-minutes` (default 88, our recipe's `max_minutes`);
  keras.io trains a fixed number of epochs ("at least 10 for convergence").
Its outputs are lowercase: the table gives cased sacreBLEU (what our headline is) and lowercased BLEU.
Nothing here is tuned: test2016 is translated once, at the end.
"""

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import print_table  # noqa: E402

RESERVED = ["[PAD]", "[UNK]", "[START]", "[END]"]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="directory with Multi30k's train/val/test_2016_flickr .gz files")
    parser.add_argument("--output", required=True, help="directory for the model, log and results.json")
    parser.add_argument("--src-lang", default="de")
    parser.add_argument("--tgt-lang", default="en")
    parser.add_argument("--max-minutes", type=float, default=88.0, help="training time budget")
    parser.add_argument("--max-epochs", type=int, default=1000, help="upper bound on epochs")
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    # keras.io's constants; smaller values only for smoke tests
    parser.add_argument("--vocab-size", type=int, default=15000)
    parser.add_argument("--sequence-length", type=int, default=40)
    parser.add_argument("--embed-dim", type=int, default=256)
    parser.add_argument("--intermediate-dim", type=int, default=2048)
    parser.add_argument("--num-heads", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-train-pairs", type=int, help="first N training pairs only (smoke tests)")
    parser.add_argument("--max-test-pairs", type=int, help="first N val/test pairs only (smoke tests)")
    return parser.parse_args(argv)


def read_pairs(data, split, src, tgt, limit=None):
    from keras_transformer.data.corpus import read_parallel_corpus

    corpus = read_parallel_corpus(os.path.join(data, f"{split}.{src}.gz"), os.path.join(data, f"{split}.{tgt}.gz"))
    return list(corpus.sources)[:limit], list(corpus.targets)[:limit]


def build_model(args, src_vocab, tgt_vocab):
    """keras.io's model, unchanged but for the vocabulary sizes (what WordPiece learned)."""
    import keras
    import keras_hub

    encoder_inputs = keras.Input(shape=(None,), name="encoder_inputs")
    x = keras_hub.layers.TokenAndPositionEmbedding(src_vocab, args.sequence_length, args.embed_dim)(encoder_inputs)
    encoder_outputs = keras_hub.layers.TransformerEncoder(intermediate_dim=args.intermediate_dim,
                                                          num_heads=args.num_heads)(inputs=x)
    decoder_inputs = keras.Input(shape=(None,), name="decoder_inputs")
    encoded = keras.Input(shape=(None, args.embed_dim), name="decoder_state_inputs")
    x = keras_hub.layers.TokenAndPositionEmbedding(tgt_vocab, args.sequence_length, args.embed_dim)(decoder_inputs)
    x = keras_hub.layers.TransformerDecoder(intermediate_dim=args.intermediate_dim, num_heads=args.num_heads)(
        decoder_sequence=x, encoder_sequence=encoded)
    x = keras.layers.Dropout(0.5)(x)
    outputs = keras.layers.Dense(tgt_vocab, activation="softmax")(x)
    decoder = keras.Model([decoder_inputs, encoded], outputs)
    return keras.Model([encoder_inputs, decoder_inputs], decoder([decoder_inputs, encoder_outputs]),
                       name="keras_io_transformer")


def budget_callback(max_minutes):
    """A callback that stops training when another epoch (the median so far) would overrun the budget."""
    import keras

    class StopBeforeBudget(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.start, self.epoch_seconds = time.time(), []

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch_start = time.time()

        def on_epoch_end(self, epoch, logs=None):
            self.epoch_seconds.append(time.time() - self.epoch_start)
            used = time.time() - self.start
            estimate = statistics.median(self.epoch_seconds)
            if used + estimate > max_minutes * 60:
                print(f"Stopping: another epoch (~{estimate / 60:.1f} min) would overrun the time budget "
                      f"({used / 60:.1f} of {max_minutes:g} min used) after epoch {epoch + 1}", flush=True)
                self.model.stop_training = True

    return StopBeforeBudget()


def main(argv=None):
    args = parse_args(argv)
    import keras
    import keras_hub
    import tensorflow as tf
    from keras import ops

    from keras_transformer.scoring import corpus_scores

    keras.utils.set_random_seed(args.seed)
    os.makedirs(args.output, exist_ok=True)
    src, tgt = args.src_lang, args.tgt_lang
    train_src, train_tgt = read_pairs(args.data, "train", src, tgt, args.max_train_pairs)
    val_src, val_tgt = read_pairs(args.data, "val", src, tgt, args.max_test_pairs)
    test_src, test_tgt = read_pairs(args.data, "test_2016_flickr", src, tgt, args.max_test_pairs)
    lower = [[s.lower() for s in texts] for texts in (train_src, train_tgt, val_src, val_tgt)]

    def word_piece(texts):
        return keras_hub.tokenizers.compute_word_piece_vocabulary(
            tf.data.Dataset.from_tensor_slices(texts).batch(1000).prefetch(2), vocabulary_size=args.vocab_size,
            reserved_tokens=RESERVED)

    start = time.time()
    src_tokenizer = keras_hub.tokenizers.WordPieceTokenizer(vocabulary=word_piece(lower[0]), lowercase=False)
    tgt_tokenizer = keras_hub.tokenizers.WordPieceTokenizer(vocabulary=word_piece(lower[1]), lowercase=False)
    print(f"WordPiece vocabularies: {src_tokenizer.vocabulary_size()} {src} / {tgt_tokenizer.vocabulary_size()} "
          f"{tgt} tokens ({time.time() - start:.0f} s)", flush=True)
    length = args.sequence_length
    pad_id, start_id, end_id = (tgt_tokenizer.token_to_id(t) for t in ("[PAD]", "[START]", "[END]"))
    src_packer = keras_hub.layers.StartEndPacker(sequence_length=length, pad_value=src_tokenizer.token_to_id("[PAD]"))
    tgt_packer = keras_hub.layers.StartEndPacker(sequence_length=length + 1, start_value=start_id, end_value=end_id,
                                                 pad_value=pad_id)

    def preprocess(source, target):
        packed = tgt_packer(tgt_tokenizer(target))
        return {"encoder_inputs": src_packer(src_tokenizer(source)), "decoder_inputs": packed[:, :-1]}, packed[:, 1:]

    def dataset(source, target):
        ds = tf.data.Dataset.from_tensor_slices((source, target)).batch(args.batch_size)
        return ds.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).shuffle(2048).prefetch(16).cache()

    model = build_model(args, src_tokenizer.vocabulary_size(), tgt_tokenizer.vocabulary_size())
    model.compile("rmsprop", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    print(f"keras.io model: {model.count_params():,} parameters", flush=True)
    stop = budget_callback(args.max_minutes)
    history = model.fit(dataset(lower[0], lower[1]), validation_data=dataset(lower[2], lower[3]),
                        epochs=args.max_epochs, callbacks=[stop], verbose=1 if sys.stdout.isatty() else 2)
    train_minutes = sum(stop.epoch_seconds) / 60
    model.save(os.path.join(args.output, "model.keras"))

    def translate(sources, sampler, batch=64):
        outputs = []
        for begin in range(0, len(sources), batch):
            chunk = [s.lower() for s in sources[begin: begin + batch]]
            encoder_tokens = ops.convert_to_tensor(src_packer(src_tokenizer(chunk)))
            rows = ops.shape(encoder_tokens)[0]

            def next_token(prompt, cache, index):
                beams = ops.shape(prompt)[0] // rows  # BeamSampler flattens (rows, beams) into the batch
                tokens = ops.repeat(encoder_tokens, beams, axis=0) if beams > 1 else encoder_tokens
                return model([tokens, prompt])[:, index - 1, :], None, cache

            prompt = ops.concatenate([ops.full((rows, 1), start_id, "int32"),
                                      ops.full((rows, length - 1), pad_id, "int32")], axis=-1)
            generated = sampler(next_token, prompt, stop_token_ids=[end_id], index=1)
            for text in tgt_tokenizer.detokenize(generated):
                text = text.numpy().decode("utf-8") if hasattr(text, "numpy") else str(text)
                for token in RESERVED:
                    text = text.replace(token, "")
                outputs.append(" ".join(text.split()))
        return outputs

    results = {"parameters": model.count_params(), "epochs": len(stop.epoch_seconds),
               "training_minutes": round(train_minutes, 1), "max_minutes": args.max_minutes,
               "final_val_loss": round(float(history.history["val_loss"][-1]), 4)}
    rows = []
    for name, sampler in (("greedy", keras_hub.samplers.GreedySampler()),
                          (f"beam {args.beam_size}", keras_hub.samplers.BeamSampler(num_beams=args.beam_size))):
        for split, sources, refs in (("val", val_src, val_tgt), ("test2016", test_src, test_tgt)):
            start = time.time()
            hypotheses = translate(sources, sampler)
            scores = corpus_scores(hypotheses, refs)
            row = {"decoding": name, "split": split, "bleu": round(scores["bleu"], 2),
                   "bleu_lowercased": round(scores["bleu_lowercased"], 2), "chrf": round(scores["chrf"], 2),
                   "signature": scores["signatures"]["bleu"], "decode_seconds": round(time.time() - start, 1)}
            rows.append(row)
            with open(os.path.join(args.output, f"{split}.{name.replace(' ', '')}.{tgt}"), "w",
                      encoding="utf-8") as f:
                f.write("\n".join(hypotheses) + "\n")
    results["scores"] = rows
    with open(os.path.join(args.output, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    print(f"\nkeras.io KerasHub model on Multi30k {src}->{tgt}: {results['epochs']} epochs in "
          f"{results['training_minutes']} min of training (budget {args.max_minutes:g}), {results['parameters']:,} "
          "parameters")
    print_table(["decoding", "split", "sacreBLEU (cased)", "BLEU (lowercased)", "chrF", "decode s"],
                [[r["decoding"], r["split"], f"{r['bleu']:.2f}", f"{r['bleu_lowercased']:.2f}", f"{r['chrf']:.2f}",
                  f"{r['decode_seconds']:.0f}"] for r in rows])
    print(f"signature: {rows[0]['signature']}")


if __name__ == "__main__":
    main()
