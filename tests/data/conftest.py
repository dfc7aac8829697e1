import random

import pytest

from keras_transformer.data import SubwordTokenizer

_SUBJECTS = ["A man", "A woman", "Two dogs", "A girl", "The boy", "Three children", "A street performer", "Ein Mann",
             "Zwei Männer", "Eine Frau", "Kinder"]
_CLOTHES = ["in a t-shirt", "in a blue-green jacket", "wearing a red hat", "with a dog's toy", "in a black shirt",
            "(left)", "(rechts)", "in jeans"]
_ACTIONS = ["is smiling", "walks down the street", "runs", "plays in the snow", "gehen", "lacht", "sits outside",
            "jumps over a fence", "is waiting at 5 o'clock", "holds a sign"]
_ENDINGS = [".", ".", ".", "!", ", smiling.", ", and it's sunny.", ' near a "Welcome" sign.', ' by a "Stop" sign.']


def make_caption_sentences(count, seed=0):
    """Caption-like sentences with the punctuation the detokenizer must glue back."""
    rng = random.Random(seed)
    sentences = []
    for _ in range(count):
        parts = [rng.choice(_SUBJECTS)]
        if rng.random() < 0.7:
            parts.append(rng.choice(_CLOTHES))
        parts.append(rng.choice(_ACTIONS))
        sentence = " ".join(parts)
        ending = rng.choice(_ENDINGS)
        sentences.append(sentence + ending)
    sentences += ["It's 5 o'clock.", "Don't stop.", "Zwei Männer (rechts) gehen.", "A man in a t-shirt, smiling."] * 5
    return sentences


@pytest.fixture(scope="session")
def caption_sentences():
    return make_caption_sentences(400)


@pytest.fixture(scope="session")
def caption_tokenizer(caption_sentences):
    return SubwordTokenizer.train(caption_sentences, vocab_size=400, verbose=0)
