"""Per-team data keys, and the teams erased (crypto-shredding, `runpoint team erase`).

Revision ID: 0021
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "team_keys",
        sa.Column("team_id", sa.Text, primary_key=True),
        sa.Column("key_id", sa.String(32), nullable=False, unique=True),
        sa.Column("wrapped", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "team_erasures",
        sa.Column("team_id", sa.Text, primary_key=True),
        sa.Column("erased_at", sa.Float, nullable=False),
        sa.Column("removed", sa.Boolean, nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    op.drop_table("team_erasures")
    op.drop_table("team_keys")
