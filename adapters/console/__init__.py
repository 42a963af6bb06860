"""The web console: static HTML, CSS and JavaScript modules that `runpoint serve` serves at
/ui. It is a client of the public HTTP API only, like any other; nothing here is Python
but this module, which tells the app where the files are."""

from pathlib import Path

DIRECTORY = Path(__file__).parent / "static"
