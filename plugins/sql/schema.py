"""Tables. Each row keeps its struct as one msgspec-encoded document beside the columns
that are queried; messages and checkpoints are only ever inserted."""

from sqlalchemy import Column, Float, Index, Integer, LargeBinary, MetaData, String, Table

metadata = MetaData()

sessions = Table(
    "sessions",
    metadata,
    Column("session_id", String(64), primary_key=True),
    Column("agent_id", String(200), nullable=False),
    Column("forked_from_session_id", String(64), index=True),
    Column("created_at", Float, nullable=False, index=True),
    Column("data", LargeBinary, nullable=False),
)

runs = Table(
    "runs",
    metadata,
    # creation order within a session (the newest run is the session's head)
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(64), nullable=False, unique=True),
    Column("session_id", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    # what a run is (ids, lineage, layout), written once; what changes as it goes
    # (status, counts, content) is the small `state` document, rewritten at each boundary
    Column("data", LargeBinary, nullable=False),
    Column("state", LargeBinary, nullable=False),
    Index("ix_runs_session_seq", "session_id", "seq"),
)

messages = Table(
    "messages",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("idx", Integer, primary_key=True, autoincrement=False),
    Column("role", String(16), nullable=False),
    Column("data", LargeBinary, nullable=False),
)

checkpoints = Table(
    "checkpoints",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("message_index", Integer, primary_key=True, autoincrement=False),
    Column("data", LargeBinary, nullable=False),
)
