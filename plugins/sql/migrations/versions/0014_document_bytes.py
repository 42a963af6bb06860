"""Documents are bytes on PostgreSQL too (BYTEA), as on SQLite (BLOB), and kept whole.

No SQL reads into a document, yet JSONB made the server parse each one as it came in and
print it as it went out, and it holds no U+0000: a document with one was kept as a JSON
array of one string, its own JSON text. Every top-level document is a JSON object (an
idempotency key's answer a JSON string), so such an array is always that wrapper: it is
unwrapped to its text, on both databases. A plain document becomes the text JSONB prints
for it (its spacing and key order; documents written later are kept as written). On
PostgreSQL each table is rewritten once, under an exclusive lock, as long as a copy of it
takes.

Revision ID: 0014
Revises: 0013
"""

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# table -> its document columns
DOCUMENTS = {
    "sessions": ("data",),
    "runs": ("data", "state"),
    "messages": ("data",),
    "checkpoints": ("data",),
    "tool_calls": ("result",),
    "idempotency_keys": ("response",),
    "session_checkpoints": ("data", "capture"),
}


def upgrade() -> None:
    _rewrite(
        # the wrapper's string is the document's text (->> unescapes it): no NUL in it
        postgresql="{c} TYPE bytea USING convert_to(CASE jsonb_typeof({c}) "
        "WHEN 'array' THEN {c} ->> 0 ELSE {c}::text END, 'UTF8')",
        # the BLOBs stay; SQLite's JSON functions read text, not BLOBs
        sqlite="UPDATE {table} SET {c} = CAST(json_extract(CAST({c} AS TEXT), '$[0]') AS BLOB) "
        "WHERE CAST({c} AS TEXT) LIKE '[%'",
    )


def downgrade() -> None:
    """Back to JSONB: a document with JSON's escape of U+0000 in its text is wrapped again,
    as 0013 kept it (the text `\\u0000` is found too: wrapped needlessly, but whole)."""
    _rewrite(
        postgresql="{c} TYPE jsonb USING CASE "
        "WHEN strpos(convert_from({c}, 'UTF8'), '\\u0000') > 0 "
        "THEN jsonb_build_array(convert_from({c}, 'UTF8')) "
        "ELSE convert_from({c}, 'UTF8')::jsonb END",
        sqlite="UPDATE {table} SET {c} = CAST(json_array(CAST({c} AS TEXT)) AS BLOB) "
        "WHERE instr(CAST({c} AS TEXT), '\\u0000') > 0",
    )


def _rewrite(postgresql: str, sqlite: str) -> None:
    """Each document column `c` of each `table`: on PostgreSQL altered as `postgresql` says
    (one ALTER TABLE a table), on SQLite updated by the statement `sqlite`."""
    on_postgresql = op.get_bind().dialect.name == "postgresql"
    for table, columns in DOCUMENTS.items():
        if on_postgresql:
            alters = ", ".join("ALTER COLUMN " + postgresql.format(c=c) for c in columns)
            op.execute(f"ALTER TABLE {table} {alters}")
        else:
            for c in columns:
                op.execute(sqlite.format(table=table, c=c))
