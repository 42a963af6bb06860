"""Schedules, and the runs they fired (one per schedule and tick).

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("schedule_id", sa.String(64), primary_key=True),
        sa.Column("team_id", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("next_run_at", sa.Float),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )
    op.create_index("ix_schedules_team_created", "schedules", ["team_id", "created_at"])
    op.create_index("ix_schedules_next_run_at", "schedules", ["next_run_at"])
    op.create_table(
        "schedule_runs",
        sa.Column("schedule_id", sa.String(64), primary_key=True),
        sa.Column("tick", sa.Float, primary_key=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("attempt_at", sa.Float, nullable=False),
        sa.Column("settled", sa.Boolean, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )
    op.create_index(
        "ix_schedule_runs_unsettled",
        "schedule_runs",
        ["attempt_at"],
        sqlite_where=sa.text("NOT settled"),
        postgresql_where=sa.text("NOT settled"),
    )


def downgrade() -> None:
    op.drop_table("schedule_runs")
    op.drop_table("schedules")
