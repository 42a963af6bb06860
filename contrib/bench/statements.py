"""What runpoint asks of PostgreSQL, counted on its side of the wire: the statements it
executes, through its engine or as reads on connections of their own (plugins/sql/readers.py),
and the round trips they take. Each statement is one round trip once it is prepared (asyncpg
keeps every connection's prepared statements, so after a warm-up none is prepared again), and
a transaction adds two: its BEGIN and its COMMIT (or ROLLBACK). A statement on an autocommit
connection, as every read is, has neither."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection

from runpoint.plugins.sql.database import Database


class Statements:
    def __init__(self, db: Database) -> None:
        self.statements = 0
        self.transactions = 0
        event.listen(db.engine.sync_engine, "before_cursor_execute", self._statement)
        event.listen(db.engine.sync_engine, "begin", self._begin)
        fetch = db.fetch

        async def read(sql: str, parameters: tuple[Any, ...]) -> Sequence[Sequence[Any]]:
            self._statement()
            return await fetch(sql, parameters)

        db.fetch = read  # type: ignore[method-assign]

    @property
    def round_trips(self) -> int:
        return self.statements + 2 * self.transactions

    def reset(self) -> None:
        self.statements = self.transactions = 0

    def _statement(self, *_: Any) -> None:
        self.statements += 1

    def _begin(self, connection: Connection) -> None:
        # SQLAlchemy begins on autocommit connections too, sending nothing
        if connection.get_execution_options().get("isolation_level") != "AUTOCOMMIT":
            self.transactions += 1
