"""Member runs: a crew run's members are runs of their own, linked to it by its id.

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

MEMBERS = sa.text("parent_run_id IS NOT NULL")


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("parent_run_id", sa.String(64)))
    op.create_index(
        "ix_runs_parent_run_id",
        "runs",
        ["parent_run_id"],
        sqlite_where=MEMBERS,
        postgresql_where=MEMBERS,
    )


def downgrade() -> None:
    op.drop_index("ix_runs_parent_run_id", "runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("parent_run_id")
