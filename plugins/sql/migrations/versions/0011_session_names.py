"""A session's name, as a client gives it (AgentOS's create and rename), in a column of its
own: a rename writes one value and rewrites no document. Sessions that exist have none.

Revision ID: 0011
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("session_name", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("session_name")
