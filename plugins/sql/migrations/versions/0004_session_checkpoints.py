"""Session checkpoints: the session event log's cursor on sessions, messages and
checkpoints; session locks; rolled-back (hidden) runs; session checkpoint rows.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

# a msgspec document, as runpoint's schema declared it then: JSONB, or a BLOB on SQLite
Document = sa.LargeBinary().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("event_seq", sa.BigInteger, nullable=False, server_default="0"))
        batch.add_column(sa.Column("locked", sa.String(32)))
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("hidden", sa.Boolean, nullable=False, server_default=sa.false()))
    for table in ("messages", "checkpoints"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("event_seq", sa.BigInteger))
    op.create_table(
        "session_checkpoints",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("checkpoint_id", sa.String(64), nullable=False, unique=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("data", Document, nullable=False),
        sa.Column("capture", Document),
    )
    op.create_index(
        "ix_session_checkpoints_session_seq", "session_checkpoints", ["session_id", "seq"]
    )


def downgrade() -> None:
    op.drop_index("ix_session_checkpoints_session_seq", "session_checkpoints")
    op.drop_table("session_checkpoints")
    for table in ("checkpoints", "messages"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("event_seq")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("hidden")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("locked")
        batch.drop_column("event_seq")
