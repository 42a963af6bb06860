"""Fewer index entries written per run: each index a write touches is a page rewritten
(SQLite's WAL takes whole pages) and entries logged (PostgreSQL's WAL).

- `ix_runs_status` held every run ever written, and on SQLite was rewritten at every
  boundary (an UPDATE that sets a column rewrites its index entries, changed or not):
  `ix_runs_in_flight` holds only the runs in flight, the ones looked up by status.
- `ix_sessions_created_at` is left to `ix_sessions_team_created`, which serves the only
  query ordering sessions by creation (a team's).
- `ix_sessions_forked_from_session_id` holds only the sessions that are forks.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

IN_FLIGHT = sa.text("status IN ('PENDING', 'RUNNING')")
FORKS = sa.text("forked_from_session_id IS NOT NULL")


def upgrade() -> None:
    op.drop_index("ix_runs_status", "runs")
    op.create_index(
        "ix_runs_in_flight", "runs", ["status"], sqlite_where=IN_FLIGHT, postgresql_where=IN_FLIGHT
    )
    op.drop_index("ix_sessions_created_at", "sessions")
    op.drop_index("ix_sessions_forked_from_session_id", "sessions")
    op.create_index(
        "ix_sessions_forked_from_session_id",
        "sessions",
        ["forked_from_session_id"],
        sqlite_where=FORKS,
        postgresql_where=FORKS,
    )


def downgrade() -> None:
    op.drop_index("ix_sessions_forked_from_session_id", "sessions")
    op.create_index("ix_sessions_forked_from_session_id", "sessions", ["forked_from_session_id"])
    op.create_index("ix_sessions_created_at", "sessions", ["created_at"])
    op.drop_index("ix_runs_in_flight", "runs")
    op.create_index("ix_runs_status", "runs", ["status"])
