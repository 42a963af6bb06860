"""SQLite's grouped writes: writes that are statements only (a boundary, event appends, a
birth: nothing in them waits for anything else) that come while one is being written go in
its transaction, each in a savepoint of its own (one that fails takes back its own
statements only), and all return once it commits: a page that several of them changed is
written once.

A write given as a function of the connection (`sqlite_saves`) goes in one trip to the
connection's thread with its transaction's control: the BEGIN if it is the group's first,
its savepoint otherwise, and the COMMIT if nobody waits to join it. A lone boundary is one
trip where it was eleven (the connection goes back with no trip: `one_hop`). The transaction's state
is SQLite's own (`in_transaction`), read in the connection's thread, so a write given up
half-way leaves nothing to mend."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any, NamedTuple, TypeVar

import aiosqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from runpoint.core.errors import Unavailable
from runpoint.plugins.sql.sqlite_saves import Statements, driver_of, in_thread

T = TypeVar("T")
GROUP_LIMIT = 64  # the most writes one transaction takes


class GivenUp(Unavailable):
    """A group's transaction whose outcome is unknown, or that SQLite took back: its
    writes may be sent again (a run's are retried, a request's answered 503)."""


class Group:
    """Grouped writes in one transaction, on one connection."""

    def __init__(self, conn: AsyncConnection, driver: aiosqlite.Connection) -> None:
        self.conn = conn
        self.driver = driver
        self.writes = 0
        self.failed: BaseException | None = None  # why the group's writes are not committed
        self.committed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # a write that failed on its own does not wait for it: its outcome may be nobody's
        self.committed.add_done_callback(lambda f: f.cancelled() or f.exception())

    async def trip(self, fn: Callable[[Statements], T]) -> T:
        """`fn` in the connection's thread, in one trip."""
        return await in_thread(self.conn, self.driver, fn)


class Outcome(NamedTuple):
    value: Any  # the body's, if it had no error
    error: BaseException | None  # the body's (or its savepoint's)
    lost: BaseException | None  # why the group's transaction is gone, if it is


def opened(s: Statements) -> bool:
    """A write's place in its group: the group's transaction begun (True) if none is open,
    else a savepoint in it."""
    if s.conn.in_transaction:
        s.one("SAVEPOINT grouped")
        return False
    s.one("BEGIN IMMEDIATE")
    return True


def undone(s: Statements, began: bool) -> bool:
    """Take back a write since `opened`: whether the group's transaction is still there
    (SQLite rolls it back whole after some errors: a full disk, an I/O error)."""
    if not s.conn.in_transaction:
        return began
    if began:
        s.one("ROLLBACK")
    else:
        s.one("ROLLBACK TO grouped")
        s.one("RELEASE grouped")
    return True


def kept(s: Statements, began: bool) -> None:
    if not began:
        s.one("RELEASE grouped")


def committed(s: Statements) -> None:
    if s.conn.in_transaction:
        try:
            s.one("COMMIT")
        except Exception:
            with contextlib.suppress(Exception):
                s.one("ROLLBACK")
            raise


def written(body: Callable[[Statements], Any], last: bool, s: Statements) -> Outcome:
    """A write in its group, in the connection's thread; committed with the group if it
    is its `last`."""
    value, error, lost = None, None, None
    try:
        began = opened(s)
        try:
            value = body(s)
        except Exception as failed:
            error = failed
            if not undone(s, began):
                lost = failed
        else:
            kept(s, began)
    except Exception as failed:  # its savepoint, or the taking back
        error = lost = error or failed
    if last:
        try:
            committed(s)
        except Exception as failed:
            lost = lost or failed
    return Outcome(value, error, lost)


class GroupedWrites:
    """The grouped writes of `Sqlite` (see the module)."""

    engine: AsyncEngine
    _write_lock: asyncio.Lock
    _waiting_alone: int  # writers waiting for the lock to write alone

    def __init__(self) -> None:
        # one write of a group at a time, and those waiting
        self._turn = asyncio.Lock()
        self._joining = 0
        self._group: Group | None = None
        self._left: asyncio.Task[None] | None = None  # a group committed after its writes

    async def grouped(self, body: Callable[[Statements], T]) -> T:
        """`body`, a function of the connection, as a grouped write in one trip."""
        group = await self._join()
        try:
            last = self._last(group)
            if last:
                self._group = None
            try:
                outcome = await group.trip(partial(written, body, last))
            except BaseException as error:  # its outcome unknown: the group's too
                unknown = GivenUp("a write of the group was given up while it was written")
                outcome = Outcome(None, error, error if isinstance(error, Exception) else unknown)
            group.writes += 1
            group.failed = group.failed or outcome.lost
            if last:
                await asyncio.shield(self._end(group))
            elif not self._joining and self._group is group:
                # those it was left open for gave up meanwhile: nobody else commits it
                self._group = None
                await asyncio.shield(self._commit(group))
        finally:
            self._turn.release()
        if outcome.error is not None:
            raise outcome.error
        await group.committed
        return outcome.value  # type: ignore[no-any-return]

    @contextlib.asynccontextmanager
    async def single_write(self) -> AsyncIterator[AsyncConnection]:
        """A grouped write of SQLAlchemy statements on the group's connection."""
        group = await self._join()
        try:
            try:
                began = await group.trip(opened)
                try:
                    yield group.conn
                except BaseException as error:
                    # a statement interrupted (a close cancelled it) cost the connection,
                    # and SQLite took the transaction back with it: a trip now would
                    # fail, and its error replace the CancelledError
                    intact = False
                    try:
                        if not group.conn.invalidated:
                            intact = await group.trip(partial(undone, began=began))
                    finally:
                        if not intact:
                            group.failed = group.failed or GivenUp(
                                f"its transaction was lost: {error}"
                            )
                    raise
                await group.trip(partial(kept, began=began))
            finally:
                last = self._last(group)
                group.writes += 1
                if last:
                    self._group = None
                    # whoever commits, the others learn how it went, even if it gives up
                    await asyncio.shield(self._commit(group))
        finally:
            self._turn.release()
        await group.committed

    def _last(self, group: Group) -> bool:
        """Whether the write whose turn it is, is its group's last: nobody waits to join
        (or one waits to write alone: it is not kept behind a stream of grouped writes)."""
        return (
            not self._joining
            or bool(self._waiting_alone)
            or group.writes + 1 >= GROUP_LIMIT
            or group.conn.invalidated  # nothing more can join it
        )

    async def _join(self) -> Group:
        """This write's turn in the open group, or in a new one."""
        self._joining += 1
        try:
            await self._turn.acquire()
        except BaseException:  # gave up waiting: the group's last write may be done
            self._joining -= 1
            self._commit_if_left()
            raise
        self._joining -= 1
        try:
            return self._group or await self._begin_group()
        except BaseException:
            self._turn.release()
            self._commit_if_left()  # a group begun for it, given up: nobody else's
            raise

    def _commit_if_left(self) -> None:
        """Commit the open group if no write of it is under way and none waits to join."""
        if self._group is not None and not self._joining and not self._turn.locked():
            group, self._group = self._group, None
            self._left = asyncio.create_task(self._commit(group), name="sqlite group commit")

    async def _begin_group(self) -> Group:
        """A group on a connection of its own (its transaction begins with its first write)."""
        await self._write_lock.acquire()
        try:
            conn = await self.engine.connect()
            try:
                self._group = Group(conn, await driver_of(conn))
            except BaseException:
                await conn.close()
                raise
        except BaseException:
            self._write_lock.release()
            raise
        # the writes that came with this one (tasks started together) join it: its
        # first write is one trip, not long enough for them to come while it goes
        await asyncio.sleep(0)
        return self._group

    async def _commit(self, group: Group) -> None:
        try:
            if group.conn.invalidated:
                raise GivenUp("a write that shared its transaction was interrupted")
            await group.trip(committed)
        except Exception as error:
            group.failed = group.failed or error
        except BaseException as error:  # the loop is closing
            group.failed = group.failed or error
            raise
        finally:
            await self._end(group)

    async def _end(self, group: Group) -> None:
        """Tell the group's writes how it went, and give its connection back."""
        try:
            if group.failed is None:
                group.committed.set_result(None)
            elif isinstance(group.failed, asyncio.CancelledError):
                group.committed.cancel()
            else:
                group.committed.set_exception(group.failed)
        finally:
            try:
                await group.conn.close()
            finally:
                self._write_lock.release()
