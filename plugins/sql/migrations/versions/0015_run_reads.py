"""Lineage in a table of its own (`run_reads`), so that removing a run keeps exactly the
rows its forks and session checkpoints read: filled here from the runs' layouts and the
READY captures.

Revision ID: 0015
Revises: 0014
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

NO_END = 2**31 - 1


def upgrade() -> None:
    table = op.create_table(
        "run_reads",
        sa.Column("source_run_id", sa.String(64), primary_key=True),
        sa.Column("reader", sa.String(64), primary_key=True),
        sa.Column("lo", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("hi", sa.Integer, nullable=False),
    )
    op.create_index("ix_run_reads_reader", "run_reads", ["reader"])
    bind = op.get_bind()
    rows: dict[tuple[str, str, int], int] = {}
    for run_id, data in bind.execute(sa.text("SELECT run_id, data FROM runs")):
        for source, lo, *end in json.loads(data).get("segments", []):
            if source != run_id:  # a segment is [run_id, start, end?]
                rows[source, run_id, lo] = end[0] if end and end[0] is not None else NO_END
    captures = "SELECT checkpoint_id, capture FROM session_checkpoints WHERE capture IS NOT NULL"
    for checkpoint_id, capture in bind.execute(sa.text(captures)):
        for run in json.loads(capture).get("runs", []):
            count = run.get("message_count", 0)
            for source, lo, *end in run.get("segments", []):
                hi = min(count, end[0]) if end and end[0] is not None else count
                if lo < hi:
                    rows[source, checkpoint_id, lo] = hi
    if rows:
        op.bulk_insert(
            table,
            [
                {"source_run_id": s, "reader": r, "lo": lo, "hi": hi}
                for (s, r, lo), hi in rows.items()
            ],
        )


def downgrade() -> None:
    op.drop_index("ix_run_reads_reader", "run_reads")
    op.drop_table("run_reads")
