"""The ceiling for reads.py: a bare Litestar app, served by uvicorn as `runpoint serve` is,
whose one endpoint returns a file of a directory as pre-encoded JSON (read once, at start).

    python contrib/bench/bare.py DIRECTORY PORT
"""

from __future__ import annotations

import sys
from pathlib import Path

import uvicorn
from litestar import Litestar, Response, get


def app(directory: Path) -> Litestar:
    documents = {path.name: path.read_bytes() for path in directory.iterdir()}

    @get("/{name:str}")
    async def document(name: str) -> Response[bytes]:
        return Response(documents[name], media_type="application/json")

    return Litestar([document], openapi_config=None)


if __name__ == "__main__":
    uvicorn.run(
        app(Path(sys.argv[1])), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning"
    )
