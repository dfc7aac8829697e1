"""A SentencePiece model file read and extended without the `sentencepiece` package: the pieces and their types
(`read_model`), whether tensorflow-text's `FastSentencepieceTokenizer` can run it (`reasons_against_fast`), and a copy
with pieces added (`DetokenizerModel`), all from the protobuf wire format of `ModelProto`.
"""

import struct

import numpy as np

# SentencePiece's `ModelProto.SentencePiece.Type` and `TrainerSpec.ModelType` values.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
UNIGRAM = 1
MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}
SPACE_SYMBOL = "\u2581"  # "▁": SentencePiece's mark for a space


def _read_varint(data, pos):
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated data")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("malformed varint")


def _proto_fields(data):
    """Yields `(field_number, value)` of a serialized protobuf message (varints as int, others as bytes)."""
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        field, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, pos = _read_varint(data, pos)
        elif wire_type in (1, 5):
            size = 8 if wire_type == 1 else 4
            value, pos = data[pos:pos + size], pos + size
        elif wire_type == 2:
            size, pos = _read_varint(data, pos)
            value, pos = data[pos:pos + size], pos + size
        else:
            raise ValueError(f"unexpected protobuf wire type {wire_type}")
        if pos > len(data) or field == 0:
            raise ValueError("truncated or malformed data")
        yield field, value


def read_model(model_proto):
    """`(pieces, types, model_type)` of a serialized SentencePiece `ModelProto`, read from the wire format (so
    neither the `sentencepiece` package nor protobuf classes are needed)."""
    pieces, types, model_type = [], [], UNIGRAM
    for field, value in _proto_fields(model_proto):
        if field == 1 and isinstance(value, bytes):  # repeated SentencePiece pieces
            piece, kind = None, NORMAL
            for sub_field, sub_value in _proto_fields(value):
                if sub_field == 1 and isinstance(sub_value, bytes):
                    try:
                        piece = sub_value.decode("utf-8")
                    except UnicodeDecodeError:
                        raise ValueError(f"piece {len(pieces)} is not UTF-8") from None
                elif sub_field == 3 and isinstance(sub_value, int):
                    kind = sub_value
            if piece is None:
                raise ValueError(f"piece {len(pieces)} has no string")
            pieces.append(piece)
            types.append(kind)
        elif field == 2 and isinstance(value, bytes):  # TrainerSpec
            for sub_field, sub_value in _proto_fields(value):
                if sub_field == 3 and isinstance(sub_value, int):
                    model_type = sub_value
    if not pieces:
        raise ValueError("no pieces")
    return pieces, types, model_type


def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


class DetokenizerModel:
    """The pieces of a copy of a SentencePiece model that pieces are added to (as user-defined pieces)."""

    def __init__(self, pieces, types):
        self.original_size = len(pieces)
        self.pieces, self.types = list(pieces), list(types)
        self.index = {}
        for i, piece in enumerate(pieces):
            self.index.setdefault(piece, i)

    def piece_id(self, piece, fallback=None):
        """The id of `piece`, added when the model lacks it. An existing piece of another type than normal or
        user-defined (a control piece comes out as nothing) gives `fallback` when that is not `None`."""
        i = self.index.get(piece)
        if i is None:
            i = self.index[piece] = len(self.pieces)
            self.pieces.append(piece)
            self.types.append(USER_DEFINED)
        elif fallback is not None and self.types[i] not in (NORMAL, USER_DEFINED):
            return fallback
        return i

    def add_separator(self):
        """A byte below 0x20 that no piece holds (nor makes, as a byte piece); added as a piece of its own."""
        used = set("".join(self.pieces))
        for value in range(1, 0x20):
            if chr(value) not in used and f"<0x{value:02X}>" not in self.index:
                self.piece_id(chr(value))
                return value
        raise ValueError("every control character from 0x01 to 0x1f is in a piece; none is free as a separator")

    def appended_fields(self):
        """The serialized `ModelProto.pieces` entries of the added pieces: appended to the serialized model they
        extend its list of pieces."""
        return b"".join(_piece_field(piece) for piece in self.pieces[self.original_size:])


def reasons_against_fast(model_proto, types, model_type):
    """Why `FastSentencepieceTokenizer` cannot run a model like `sentencepiece` (an empty list when it can): it
    runs unigram models only, keeps normal, unknown and control pieces only (it fails on byte and unused ones and
    scores user-defined ones like normal pieces, where SentencePiece matches them first), and ignores
    `treat_whitespace_as_suffix` and a denormalizer."""
    reasons = []
    if model_type != UNIGRAM:
        reasons.append(f"is a {MODEL_TYPES.get(model_type, f'type {model_type}')} model, not unigram")
    for kind, name in ((BYTE, "byte (byte fallback)"), (UNUSED, "unused"), (USER_DEFINED, "user-defined")):
        if kind in types:
            reasons.append(f"has {name} pieces")
    for field, value in _proto_fields(model_proto):
        if field == 2 and isinstance(value, bytes):  # TrainerSpec
            if any(sub_field == 24 and sub_value for sub_field, sub_value in _proto_fields(value)):
                reasons.append("treats whitespace as a suffix")
        elif field == 5 and isinstance(value, bytes) and value:  # denormalizer_spec
            if any(sub_field in (2, 6) and sub_value for sub_field, sub_value in _proto_fields(value)):
                reasons.append("has a denormalizer")
    return reasons


def _piece_field(piece):
    """A serialized `ModelProto.pieces` entry: a user-defined piece (appended to a model, it extends the list)."""
    text = piece.encode("utf-8")
    message = b"\x0a" + _varint(len(text)) + text + b"\x15" + struct.pack("<f", 0.0) + b"\x18" + _varint(USER_DEFINED)
    return b"\x0a" + _varint(len(message)) + message

def detokenization_tables(pieces, types, vocab):
    """What detokenizing `vocab` (our tokens; the first 4 special) with a model of `pieces` / `types` needs.

    Our id -> the piece of a copy of the model that also has the vocabulary's missing tokens, the pieces without
    their leading "▁" (for the first piece of a text) and a separator piece.

    Returns:
        `(special, blank, sp_from_ids, first_sp_from_ids, separator, separator_id, appended_fields)`: NumPy arrays
        over our ids (dropped tokens, whitespace-only ones, the copy's piece id, the piece id at a text's start), the
        separator's character code and piece id, and the serialized pieces to append to the model.
    """
    detok = DetokenizerModel(pieces, types)
    special = np.zeros(len(vocab), dtype=bool)
    special[:4] = True
    blank = np.zeros(len(vocab), dtype=bool)
    sp_from_ids = np.zeros(len(vocab), dtype=np.int32)
    first_sp_from_ids = np.zeros(len(vocab), dtype=np.int32)
    for i, token in enumerate(vocab[4:], start=4):
        if not token:
            special[i] = True  # it comes out as nothing
            continue
        sp_from_ids[i] = first_sp_from_ids[i] = detok.piece_id(token)
        kind = detok.types[sp_from_ids[i]]
        blank[i] = surface_is_blank(token, kind)
        if kind in (NORMAL, USER_DEFINED) and token.startswith(SPACE_SYMBOL) and not blank[i]:
            first_sp_from_ids[i] = detok.piece_id(token[len(SPACE_SYMBOL):], fallback=sp_from_ids[i])
    separator = detok.add_separator()
    separator_id = detok.piece_id(chr(separator))
    return special, blank, sp_from_ids, first_sp_from_ids, separator, separator_id, detok.appended_fields()


def surface_is_blank(piece, kind):
    """Whether a piece comes out as nothing or only whitespace when detokenized."""
    if kind == CONTROL:
        return True
    if kind == UNKNOWN:
        return False  # SentencePiece writes " \u2047 "
    if kind == BYTE:
        value = int(piece[3:-1], 16)
        return value < 0x80 and chr(value).isspace()
    return not piece.replace(SPACE_SYMBOL, " ").strip()
