"""Documents as both databases keep them: msgspec JSON, whole even with a U+0000 in it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

import msgspec

T = TypeVar("T")
encode = msgspec.json.Encoder().encode
# PostgreSQL's JSONB holds no U+0000, whose JSON escape is this
_NUL = b"\\u0000"


def storable(document: bytes) -> bytes:
    """A document as both databases hold it: one with a NUL is kept as a JSON array of one
    string, its own JSON text, in which the escape is mere text. (The text `\\u0000`, a
    backslash before u0000, is found too: its document is wrapped, needlessly but whole.)"""
    return encode((document.decode(),)) if _NUL in document else document


def document(value: object) -> bytes:
    """`value` encoded, ready for a document column."""
    return storable(encode(value))


class Decoder(Generic[T]):
    """Decodes stored documents of `kind`, wrapped by `storable` or not."""

    def __init__(self, kind: type[T]) -> None:
        self._plain = msgspec.json.Decoder(kind).decode
        self._stored = msgspec.json.Decoder(kind | tuple[str]).decode

    def __call__(self, data: bytes | str) -> T:
        document = self._stored(data)
        return self._plain(document[0]) if isinstance(document, tuple) else document

    def all(self, documents: Sequence[bytes | str]) -> list[T]:
        """Many documents, as fast as plain ones while none of them is wrapped (a run's
        transcript: a Python call per message would cost a tenth more)."""
        try:
            return [self._plain(data) for data in documents]
        except msgspec.ValidationError:
            return [self(data) for data in documents]
