"""The run queue's tables on PostgreSQL: pgqueuer's (SQLite has no queue).

They are pgqueuer's own schema, as the installed pgqueuer declares it; a later pgqueuer
that changes it comes with a migration applying its upgrade (`Queries.plan_upgrade`).

Revision ID: 0006
Revises: 0005
"""

from alembic import op

from runpoint.plugins.sql import queue

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in queue.install_statements():
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in queue.uninstall_statements():
            op.execute(statement)
