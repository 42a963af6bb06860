"""The codec the encryption checks give a backend (`suite.encrypted`): a real one that also
records what passes through it, so the checks can tell that a backend stores the
ciphertext it is given and hands it back unchanged, bound to the same row."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from runpoint.core.sealing import Binding, Codec


class Recording(Codec):
    """Records the ciphertexts it gives for each binding, and each document a backend
    hands it to open that it did not give for that very binding (`strays`). Given a
    `marker`, it can also move ciphertexts between rows: with `moving`, a document that
    holds the marker is given the ciphertext of the first such document of its kind and
    field sealed for another row, as if the stored bytes had been copied over."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.given: dict[Binding, set[bytes]] = {}
        self.strays: list[str] = []
        self.opens = 0
        self.marker = b""
        self.moving = False
        self._marked: dict[Binding, tuple[Binding, bytes]] = {}  # by (kind, field)

    def seal(self, document: bytes, kind: str, field: str, *key: object, team: str) -> bytes:
        sealed = super().seal(document, kind, field, *key, team=team)
        binding = (kind, field, *key)
        if self.marker and self.marker in document:
            first = self._marked.setdefault((kind, field), (binding, sealed))
            if self.moving and first[0] != binding:
                return first[1]
        self.given.setdefault(binding, set()).add(sealed)
        return sealed

    def open(self, stored: bytes, kind: str, field: str, *key: object) -> bytes:
        self._record(kind, field, [(*key, stored)], len(key))
        return super().open(stored, kind, field, *key)

    def open_rows(
        self, kind: str, field: str, rows: Sequence[Sequence[Any]], keys: int
    ) -> list[bytes]:
        self._record(kind, field, rows, keys)
        return super().open_rows(kind, field, rows, keys)

    def _record(self, kind: str, field: str, rows: Iterable[Sequence[Any]], keys: int) -> None:
        for row in rows:
            self.opens += 1
            if row[keys] not in self.given.get((kind, field, *row[:keys]), ()):
                self.strays.append(f"{kind}({', '.join(map(str, row[:keys]))}).{field}")


def in_the_clear(holder: object, text: bytes, *, besides: object) -> list[str]:
    """Where `text` is among the objects `holder` keeps (a backend: its own objects, the
    containers and structs they hold; not `besides`, its codec, which keeps the documents
    it opened, nor other libraries' objects): each as a path from `holder`."""
    found: list[str] = []
    seen = {id(besides)}
    todo: list[tuple[str, object]] = [("", holder)]
    while todo:
        path, value = todo.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, str):
            value = value.encode()
        if isinstance(value, bytes | bytearray | memoryview):
            if text in bytes(value):
                found.append(path or "itself")
        elif isinstance(value, dict):
            todo += [(f"{path}[{k!r}]", v) for k, v in value.items()]
            todo += [(f"{path} key", k) for k in value]
        elif isinstance(value, list | tuple | set | frozenset):
            todo += [(f"{path}[{i}]", v) for i, v in enumerate(value)]
        elif isinstance(value, msgspec.Struct):
            todo += [(f"{path}.{f}", getattr(value, f)) for f in value.__struct_fields__]
        elif type(value).__module__.startswith("runpoint.") and hasattr(value, "__dict__"):
            todo += [(f"{path}.{name}", v) for name, v in vars(value).items()]
    return found
