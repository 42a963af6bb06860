"""A state-capture plugin for tests: each session owns a directory of files (the seeds'
"sandbox machine state" in small), captured as a tar archive."""

from __future__ import annotations

import asyncio
import io
import shutil
import tarfile
from collections.abc import Mapping
from pathlib import Path

from runpoint import hookimpl
from runpoint.seams.session_state import SessionState


class DirectoryState:
    """Registers itself as the state named "files". `fail_capture` makes captures raise;
    `fail_restore` makes the restore of that number (1 for the first) raise; `hold`
    makes restores wait for it to be set (`restoring` is set meanwhile)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.fail_capture = False
        self.fail_restore: int | None = None
        self.restores = 0
        self.hold: asyncio.Event | None = None
        self.restoring = asyncio.Event()

    @hookimpl
    def runpoint_session_state(self) -> Mapping[str, SessionState]:
        return {"files": self}

    def directory(self, session_id: str) -> Path:
        return self.root / session_id

    def files(self, session_id: str) -> dict[str, bytes]:
        """The session's files, by path, byte for byte."""
        top = self.directory(session_id)
        return {
            str(p.relative_to(top)): p.read_bytes() for p in sorted(top.rglob("*")) if p.is_file()
        }

    def sessions(self) -> set[str]:
        return {p.name for p in self.root.iterdir()} if self.root.exists() else set()

    async def capture(self, session_id: str) -> bytes:
        if self.fail_capture:
            raise OSError("the sandbox did not answer")
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            for name, data in self.files(session_id).items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return archive.getvalue()

    async def restore(self, session_id: str, state: bytes) -> None:
        self.restores += 1
        self.restoring.set()
        if self.hold is not None:
            await self.hold.wait()
        if self.restores == self.fail_restore:
            raise OSError("the sandbox refused the restore")
        # unpack beside, then swap: a failed unpack leaves the directory as it was, and
        # a restore killed half-way leaves only a staging directory, which the next clears
        staging = self.root / f".{session_id}.restoring"
        shutil.rmtree(staging, ignore_errors=True)
        with tarfile.open(fileobj=io.BytesIO(state)) as tar:
            tar.extractall(staging, filter="data")
        await self.discard(session_id)
        staging.mkdir(parents=True, exist_ok=True)
        staging.rename(self.directory(session_id))

    async def discard(self, session_id: str) -> None:
        shutil.rmtree(self.directory(session_id), ignore_errors=True)
