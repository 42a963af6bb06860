"""Agno's web UI (github.com/agno-agi/agent-ui, a Next.js app), built once for the tests.

`python -m tests.console.agent_ui` builds the commit pinned here into a cache directory
outside the repository (`$RUNPOINT_AGENT_UI_CACHE`, else ~/.cache/runpoint/agent-ui), one
directory per commit, and does nothing when that build is already there. It takes the
source from `$RUNPOINT_AGENT_UI_GIT` (a clone or mirror of the repository, or its URL;
GitHub's by default), its dependencies from the npm registry at the versions of the UI's
own pnpm lock file, and builds for production (`next build`). The UI loads its fonts with
next/font/google, which fetches them from Google while building: the build replaces that
import with fallbacks, in the build's copy only. No file of the UI is kept in this
repository. Needs git and node/npm.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

COMMIT = "c084377d437df8d5d168792c9f0ca63cf61429f8"  # 2025-12-12, Next.js 15.2.8
SOURCE = "https://github.com/agno-agi/agent-ui.git"
PNPM = "pnpm@9.15.9"  # reads the UI's lockfile (version 9.0)
GIT_ENV, CACHE_ENV, REQUIRE_ENV = (
    "RUNPOINT_AGENT_UI_GIT",
    "RUNPOINT_AGENT_UI_CACHE",
    "RUNPOINT_REQUIRE_AGENT_UI",
)

LAYOUT = Path("src/app/layout.tsx")
GOOGLE_FONTS = "from 'next/font/google'"
OFFLINE_FONTS = """\
// runpoint's offline build: next/font/google would fetch these fonts from Google while
// building; without them the page keeps its fallback fonts
type Font = { variable: string; className: string; style: { fontFamily: string } }
const fallback = (options: Record<string, unknown>): Font => ({
  variable: '',
  className: '',
  style: { fontFamily: String(options.fallback ?? 'sans-serif') }
})
export const Geist = fallback
export const DM_Mono = fallback
"""


def built() -> Path:
    """Where the build of COMMIT is (a directory with a `.next` when it has been built)."""
    cache = os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "runpoint" / "agent-ui"
    return Path(cache) / COMMIT


def build() -> Path:
    target = built()
    if (target / ".next" / "BUILD_ID").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as work:
        app = Path(work) / "app"
        checkout(Path(work) / "git", app)
        use_offline_fonts(app)
        run(["npx", "--yes", PNPM, "install", "--frozen-lockfile"], app)
        run([str(app / "node_modules" / ".bin" / "next"), "build"], app)
        shutil.rmtree(app / ".next" / "cache")  # the compiler's, for rebuilds (185 MB)
        app.rename(target)  # whole, or not at all
    return target


def checkout(git: Path, app: Path) -> None:
    source = os.environ.get(GIT_ENV) or SOURCE
    run(["git", "init", "--quiet", "--bare", str(git)], git.parent)
    run(
        ["git", "--git-dir", str(git), "fetch", "--quiet", "--depth", "1", source, COMMIT],
        git.parent,
    )
    app.mkdir()
    archive = subprocess.run(
        ["git", "--git-dir", str(git), "archive", COMMIT], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(app)], input=archive, check=True)


def use_offline_fonts(app: Path) -> None:
    layout = app / LAYOUT
    text = layout.read_text()
    if GOOGLE_FONTS not in text:
        sys.exit(f"{LAYOUT} of agent-ui {COMMIT} no longer imports {GOOGLE_FONTS}")
    layout.write_text(text.replace(GOOGLE_FONTS, "from './offline-fonts'"))
    (layout.parent / "offline-fonts.ts").write_text(OFFLINE_FONTS)


def run(command: list[str], cwd: Path) -> None:
    print("+", " ".join(command), flush=True)
    env = {**os.environ, "NEXT_TELEMETRY_DISABLED": "1"}
    subprocess.run(command, cwd=cwd, env=env, check=True)


if __name__ == "__main__":
    for tool in ("git", "npx"):
        if shutil.which(tool) is None:
            sys.exit(f"building agent-ui needs {tool}")
    print(build())
