"""Random secrets of the database: the first one stored under a name is every process's."""

from __future__ import annotations

from sqlalchemy import select

from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.schema import secrets


class SqlSecrets:
    db: Database

    async def secret(self, name: str, new: bytes) -> bytes:
        async with self.db.write() as conn:
            await conn.execute(self.db.insert_new(secrets).values(name=name, value=new))
            stored = await conn.execute(select(secrets.c.value).where(secrets.c.name == name))
            value: bytes = stored.scalar_one()
        return value
