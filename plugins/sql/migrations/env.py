"""Alembic environment: runpoint hands in the connection (see runpoint.plugins.sql.migrate)."""

from alembic import context

from runpoint.plugins.sql.schema import metadata

context.configure(
    connection=context.config.attributes["connection"],
    target_metadata=metadata,
    render_as_batch=True,  # SQLite alters tables by copying them
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
