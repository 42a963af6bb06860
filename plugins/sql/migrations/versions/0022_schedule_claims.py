"""Schedules claimed by one process at a time, and fired runs looked at when due.

`schedules.claimed_until`: a process takes a batch of due schedules for a while, so two
processes share a minute's ticks rather than both working through all of them (a tick's
Idempotency-Key still makes it fire once). `schedule_runs.deadline`: when the run's
attempt runs out of time; until then, or its run ends, the loop does not read it.

Revision ID: 0022
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("schedules", sa.Column("claimed_until", sa.Float))
    op.add_column("schedule_runs", sa.Column("deadline", sa.Float))


def downgrade() -> None:
    with op.batch_alter_table("schedule_runs") as batch:
        batch.drop_column("deadline")
    with op.batch_alter_table("schedules") as batch:
        batch.drop_column("claimed_until")
