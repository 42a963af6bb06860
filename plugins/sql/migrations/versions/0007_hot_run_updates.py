"""Run and session rows updated in place: the lease no longer indexed, room on each page.

A run's row is rewritten at every boundary (state, revision, lease), and its session's
(the event log's cursor). PostgreSQL can do that as a heap-only update, with no new index
entries, only when no indexed column changes and the page has room; the lease's expiry was
indexed, so every write touched all four indexes of runs. Expired leases are found among
the few runs in flight, by status alone.

Revision ID: 0007
Revises: 0006
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_runs_status_lease", "runs")
    op.create_index("ix_runs_status", "runs", ["status"])
    if op.get_bind().dialect.name == "postgresql":
        for table in ("runs", "sessions"):
            op.execute(f"ALTER TABLE {table} SET (fillfactor = 70)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in ("runs", "sessions"):
            op.execute(f"ALTER TABLE {table} RESET (fillfactor)")
    op.drop_index("ix_runs_status", "runs")
    op.create_index("ix_runs_status_lease", "runs", ["status", "lease_expires_at"])
