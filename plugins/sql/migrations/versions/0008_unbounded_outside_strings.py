"""What comes from outside is text of any length: only what runpoint makes keeps one.

A client names its sessions (up to the contract's 128 characters), a model provider its
tool calls, a token its team, and an idempotency key's scope joins the team with the ids
a request names: on PostgreSQL a value longer than its VARCHAR was refused (a 500, the
request lost); SQLite never checks lengths. How long such a value may be is for the
contract, the authentication and the run loop to say, clearly, not for the database. Widening
VARCHAR to TEXT rewrites nothing on PostgreSQL; SQLite copies the five tables (batch mode).

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# table -> its columns that become TEXT, with their length until now
WIDENED = {
    "sessions": {"session_id": 64, "agent_id": 200, "team_id": 200, "forked_from_session_id": 64},
    "runs": {"session_id": 64},
    "session_checkpoints": {"session_id": 64},
    "tool_calls": {"tool_call_id": 200},
    "idempotency_keys": {"scope": 200, "key": 200},
}


def upgrade() -> None:
    for table, columns in WIDENED.items():
        with op.batch_alter_table(table) as batch:
            for column, length in columns.items():
                batch.alter_column(column, type_=sa.Text(), existing_type=sa.String(length))


def downgrade() -> None:
    # PostgreSQL refuses this while a value is longer than its old column: nothing is cut
    for table, columns in WIDENED.items():
        with op.batch_alter_table(table) as batch:
            for column, length in columns.items():
                batch.alter_column(column, type_=sa.String(length), existing_type=sa.Text())
