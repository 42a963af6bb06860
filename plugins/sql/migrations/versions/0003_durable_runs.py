"""Durable runs: leases, cross-process cancellation, tool call records, idempotency keys.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# a msgspec document, as runpoint's schema declared it then: JSONB, or a BLOB on SQLite
Document = sa.LargeBinary().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("lease_owner", sa.String(64)))
        batch.add_column(sa.Column("lease_expires_at", sa.Float))
        batch.add_column(
            sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("recoveries", sa.Integer, nullable=False, server_default="0"))
    op.create_index("ix_runs_status_lease", "runs", ["status", "lease_expires_at"])
    op.create_table(
        "tool_calls",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("tool_call_id", sa.String(200), primary_key=True),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("result", Document),
    )
    op.create_table(
        "idempotency_keys",
        sa.Column("scope", sa.String(200), primary_key=True),
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("response", Document),
    )


def downgrade() -> None:
    op.drop_table("idempotency_keys")
    op.drop_table("tool_calls")
    op.drop_index("ix_runs_status_lease", "runs")
    with op.batch_alter_table("runs") as batch:
        for column in ("recoveries", "cancel_requested", "lease_expires_at", "lease_owner"):
            batch.drop_column(column)
