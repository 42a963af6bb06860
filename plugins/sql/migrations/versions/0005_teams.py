"""Teams: every session belongs to one; sessions made before teams belong to the default.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

DEFAULT_TEAM = "default"  # runpoint's default team then


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(
            sa.Column("team_id", sa.String(200), nullable=False, server_default=DEFAULT_TEAM)
        )
    op.create_index("ix_sessions_team_created", "sessions", ["team_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_sessions_team_created", "sessions")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("team_id")
