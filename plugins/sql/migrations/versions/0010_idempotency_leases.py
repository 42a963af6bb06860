"""Idempotency-Key claims hold a lease: the claim's owner and until when, so a claim whose
process died runs out and a retry takes the key over. Claims already unanswered have none:
they have run out.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("idempotency_keys") as batch:
        batch.add_column(sa.Column("owner", sa.String(64)))
        batch.add_column(sa.Column("expires_at", sa.Float))


def downgrade() -> None:
    with op.batch_alter_table("idempotency_keys") as batch:
        batch.drop_column("expires_at")
        batch.drop_column("owner")
