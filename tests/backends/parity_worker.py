"""Runs one model file through the backend named by KERAS_BACKEND and writes what it computed (see test_parity.py).

    KERAS_BACKEND=jax python -m tests.backends.parity_worker MODEL.keras DATA.npz OUT.npz
"""

import sys

import keras
import numpy as np

import keras_transformer.models  # noqa: F401 (registers the classes a .keras file names)
from keras_transformer.decoding import beam_search
from keras_transformer.decoding import greedy_decode

START, END, STEPS = 1, 2, 6


def main(model_path, data_path, out_path):
    data = np.load(data_path)
    model = keras.saving.load_model(model_path)
    inputs = {"encoder_inputs": data["src"], "decoder_inputs": data["dec"]}
    logits = keras.ops.convert_to_numpy(model(inputs, training=False))
    greedy = keras.ops.convert_to_numpy(greedy_decode(model, data["src"], 8, START, END))
    beam, scores = beam_search(model, data["src"], 8, START, END, beam_size=3, return_scores=True)
    # A few training steps from the file's weights on the same batches: the loss of each step.
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0))
    losses = []
    for step in range(STEPS):
        rows = slice(8 * step, 8 * step + 8)
        batch = {"encoder_inputs": data["train_src"][rows], "decoder_inputs": data["train_dec"][rows]}
        losses.append(float(model.train_on_batch(batch, data["train_labels"][rows])))
    model.save(out_path + ".keras")  # trained here; the test loads it back on TensorFlow
    trained_logits = keras.ops.convert_to_numpy(model(inputs, training=False))
    np.savez(out_path, backend=keras.backend.backend(), logits=logits, greedy=np.asarray(greedy),
             trained_logits=trained_logits,
             beam=keras.ops.convert_to_numpy(beam), scores=keras.ops.convert_to_numpy(scores),
             losses=np.asarray(losses))


if __name__ == "__main__":
    main(*sys.argv[1:4])
