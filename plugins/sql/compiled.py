"""Statements compiled once for a dialect and executed on its driver: the SQL its driver
takes, and the positional values a statement's parameters are sent as. The hot statements
(every read, PostgreSQL's one-statement writes) spend nothing on SQLAlchemy's statement
cache, its events or its result rows."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

from sqlalchemy import Insert, Select
from sqlalchemy.engine import Dialect


class Compiled(NamedTuple):
    sql: str
    names: tuple[str, ...]  # of its positional parameters, in order
    literals: dict[str, Any]  # values of the parameters the statement itself holds

    @classmethod
    def of(cls, statement: Select[Any] | Insert, dialect: Dialect) -> Compiled:
        compiled = statement.compile(dialect=dialect)
        literals = {n: v for n, v in compiled.params.items() if v is not None}
        return cls(str(compiled), tuple(compiled.positiontup or ()), literals)

    def parameters(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        """The driver's values for the statement's parameters, `values` by name."""
        given = self.literals | dict(values)
        return tuple(given[name] for name in self.names)


@functools.lru_cache(maxsize=512)
def compiled(statement: Select[Any], dialect: Dialect) -> Compiled:
    """`statement` compiled for `dialect`, once: the role modules keep one statement object
    per shape (see transcripts.py)."""
    return Compiled.of(statement, dialect)
