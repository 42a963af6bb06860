"""Approvals: the inbox of paused runs' calls that wait for a person.

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "approvals",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("session_id", sa.Text, nullable=False),
        sa.Column("agent_id", sa.Text, nullable=False),
        sa.Column("team_id", sa.Text, nullable=False),
        sa.Column("user_id", sa.Text),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("pause_type", sa.String(16), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )
    op.create_index("ix_approvals_team_created", "approvals", ["team_id", "created_at"])
    op.create_index("ix_approvals_run", "approvals", ["run_id"])
    op.create_index("ix_approvals_due", "approvals", ["status", "expires_at"])


def downgrade() -> None:
    op.drop_table("approvals")
