"""`runpoint serve` freezes what its start-up made: the garbage collector's full
collections walk only what came since (contrib/bench/storage.py's long runs set off
several)."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_telemetry import python


def test_a_server_leaves_its_start_up_out_of_the_collections(tmp_path: Path) -> None:
    answer = python(
        "import gc, json",
        "from litestar.testing import TestClient",
        "from runpoint.adapters.serving import app_from_env",
        "before = gc.get_freeze_count()",
        "with TestClient(app_from_env()) as client:",
        "    frozen = gc.get_freeze_count()",
        "    data = {'message': 'Paris', 'stream': 'false'}",
        "    run = client.post('/agents/travel-agent/runs', data=data).json()",
        "    gc.collect()",
        "    walked = len(gc.get_objects())",
        "print(json.dumps({'before': before, 'frozen': frozen, 'walked': walked,",
        "    'run': run['status']}))",
        RUNPOINT_DB=str(tmp_path / "x.db"),
    )
    assert answer["run"] == "COMPLETED"
    assert answer["before"] == 0
    frozen, walked = answer["frozen"], answer["walked"]
    assert isinstance(frozen, int) and isinstance(walked, int)
    assert frozen > 20 * walked  # a collection walks a small part of the process
