"""Alembic environment: runpoint hands in the connection (see runpoint.plugins.sql.migrate)."""

from alembic import context

from runpoint.plugins.sql.migrate import ours
from runpoint.plugins.sql.schema import metadata

context.configure(
    connection=context.config.attributes["connection"],
    target_metadata=metadata,
    render_as_batch=True,  # SQLite alters tables by copying them
    compare_type=True,
    include_name=ours,  # autogenerate leaves the run queue's tables to pgqueuer
)
with context.begin_transaction():
    context.run_migrations()
