"""The first schema: sessions, runs, append-only messages and checkpoints.

Revision ID: 0001
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# a msgspec document, as runpoint's schema declared it then: JSONB, or a BLOB on SQLite
Document = sa.LargeBinary().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("session_id", sa.String(64), primary_key=True),
        sa.Column("agent_id", sa.String(200), nullable=False),
        sa.Column("forked_from_session_id", sa.String(64)),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("data", Document, nullable=False),
    )
    op.create_index("ix_sessions_forked_from_session_id", "sessions", ["forked_from_session_id"])
    op.create_index("ix_sessions_created_at", "sessions", ["created_at"])
    op.create_table(
        "runs",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(64), nullable=False, unique=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("data", Document, nullable=False),
    )
    op.create_index("ix_runs_session_seq", "runs", ["session_id", "seq"])
    op.create_table(
        "messages",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("idx", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("data", Document, nullable=False),
    )
    op.create_table(
        "checkpoints",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("message_index", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("data", Document, nullable=False),
    )


def downgrade() -> None:
    for table in ("checkpoints", "messages", "runs", "sessions"):
        op.drop_table(table)
