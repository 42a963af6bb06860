"""Queryable roles and statuses; a run's changing state apart from its write-once row.

Adds messages.role (so a boundary is found without reading the transcript), runs.status,
runs.revision (one writer per run) and runs.state, filled from the documents.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# a msgspec document, as runpoint's schema declared it then: JSONB, or a BLOB on SQLite
Document = sa.LargeBinary().with_variant(JSONB(), "postgresql")


def _field(name: str) -> str:
    """SQL reading a top-level string field of the `data` document."""
    if op.get_bind().dialect.name == "postgresql":
        return f"data->>'{name}'"
    return f"json_extract(CAST(data AS TEXT), '$.{name}')"


def upgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.add_column(sa.Column("role", sa.String(16)))
    op.execute(f"UPDATE messages SET role = {_field('role')}")
    with op.batch_alter_table("messages") as batch:
        batch.alter_column("role", existing_type=sa.String(16), nullable=False)

    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("status", sa.String(16)))
        batch.add_column(sa.Column("revision", sa.Integer, nullable=False, server_default="0"))
        batch.add_column(sa.Column("state", Document))
    # a run's document holds every field of its state (unset ones are defaults)
    op.execute(f"UPDATE runs SET status = COALESCE({_field('status')}, 'PENDING'), state = data")
    with op.batch_alter_table("runs") as batch:
        batch.alter_column("status", existing_type=sa.String(16), nullable=False)
        batch.alter_column("state", existing_type=Document, nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        for column in ("state", "revision", "status"):
            batch.drop_column(column)
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("role")
