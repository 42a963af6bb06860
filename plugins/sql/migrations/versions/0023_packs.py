"""Packs: a row of `messages` or `checkpoints` may hold several, `n` (1 for every row
written before): a run's settled rows are packed a window at a time (plugins/sql/packs.py).

Revision ID: 0023
Revises: 0022
"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("messages", "checkpoints"):
        op.add_column(table, sa.Column("n", sa.Integer, nullable=False, server_default="1"))


def downgrade() -> None:
    # a pack read as one message or checkpoint would be a wrong one: refuse, not corrupt
    for table in ("messages", "checkpoints"):
        if op.get_bind().execute(sa.text(f"SELECT 1 FROM {table} WHERE n > 1 LIMIT 1")).first():
            raise RuntimeError(f"{table} holds packs, which revision 0022 cannot read")
    for table in ("checkpoints", "messages"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("n")
