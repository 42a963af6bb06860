"""Tables. Each row keeps its struct as one msgspec-encoded document beside the columns
that are queried; messages and checkpoints are only ever inserted. A document is its JSON
bytes, a BLOB (BYTEA on PostgreSQL): no SQL reads into one, so the database keeps it as
written (JSONB parsed each on the way in, printed it on the way out, and held no U+0000)
and msgspec decodes it straight into its struct.

A string that comes from outside (a session id a client chose, an agent id, a team, a
model's tool call id, an idempotency key) is `Text`: the contract, the authentication and
the run loop bound it (docs/http.md, "Bounds"), and the database never refuses one
(PostgreSQL enforces a VARCHAR's length, SQLite does not). `String(N)` holds only what
runpoint makes: its own ids (uuid4), statuses, roles, lock reasons and hashes."""

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    false,
    text,
)

from runpoint.core.tenancy import DEFAULT_TEAM
from runpoint.core.types import RunStatus

metadata = MetaData()
# an open segment's end, and a page token's largest value: the largest INTEGER both store
NO_END = 2**31 - 1

# the condition a run in flight meets, as the status index has it: a query finds the index
# by repeating it (literals: a bound parameter would not prove a row is in the index)
RUNS_IN_FLIGHT = text(f"status IN ('{RunStatus.PENDING.value}', '{RunStatus.RUNNING.value}')")

sessions = Table(
    "sessions",
    metadata,
    Column("session_id", Text, primary_key=True),
    Column("agent_id", Text, nullable=False),
    Column("team_id", Text, nullable=False, server_default=DEFAULT_TEAM),
    Column("forked_from_session_id", Text),
    Column("created_at", Float, nullable=False),
    Column("data", LargeBinary, nullable=False),
    # the name a client gave it: its own column, so a rename rewrites no document
    Column("session_name", Text),
    # the session's event log cursor: the seq of its latest event (messages, boundaries)
    Column("event_seq", BigInteger, nullable=False, server_default="0"),
    # why it refuses work for now ("rollback", "maintenance"), or NULL
    Column("locked", String(32)),
    Index("ix_sessions_team_created", "team_id", "created_at"),
    # forks only: a session's forks are looked up before it is deleted (migration 0012)
    FORKS := Index(
        "ix_sessions_forked_from_session_id",
        "forked_from_session_id",
        sqlite_where=text("forked_from_session_id IS NOT NULL"),
    ),
)

runs = Table(
    "runs",
    metadata,
    # creation order within a session (the newest run is the session's head)
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(64), nullable=False, unique=True),
    Column("session_id", Text, nullable=False),
    Column("status", String(16), nullable=False),
    # bumped by every write: one writer per run (a stale writer's update matches no row)
    Column("revision", Integer, nullable=False, server_default="0"),
    # what a run is (ids, lineage, layout), written once; what changes as it goes
    # (status, counts, content) is the small `state` document, rewritten at each boundary
    Column("data", LargeBinary, nullable=False),
    Column("state", LargeBinary, nullable=False),
    # who executes the run, until when: a run whose lease ran out lost its process
    Column("lease_owner", String(64)),
    Column("lease_expires_at", Float),
    Column("cancel_requested", Boolean, nullable=False, server_default=false()),
    Column("recoveries", Integer, nullable=False, server_default="0"),
    # rolled back: kept and readable, out of its session's live history
    Column("hidden", Boolean, nullable=False, server_default=false()),
    # a member's run: the crew run it works for (NULL for every other run); such a run is
    # not part of its session's live history, it is read through its crew run
    Column("parent_run_id", String(64)),
    Index("ix_runs_session_seq", "session_id", "seq"),
    # the runs in flight, by status: not the lease, rewritten at each boundary (migration
    # 0007, heap-only updates), nor runs that ended (0012)
    IN_FLIGHT := Index("ix_runs_in_flight", "status", sqlite_where=RUNS_IN_FLIGHT),
    # members only (migration 0019)
    MEMBERS := Index(
        "ix_runs_parent_run_id", "parent_run_id", sqlite_where=text("parent_run_id IS NOT NULL")
    ),
)
# The partial indexes. PostgreSQL's have the same conditions, which postgresql.py declares:
# a `postgresql_where` here would import SQLAlchemy's PostgreSQL dialect (most of a tenth
# of a second) into every start on SQLite. (`PARTIAL_INDEXES`, after the last table.)

messages = Table(
    "messages",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("idx", Integer, primary_key=True, autoincrement=False),
    Column("role", String(16), nullable=False),  # a pack's: its members' first letters
    Column("data", LargeBinary, nullable=False),
    # its place in its session's event log (NULL for rows written before the log existed,
    # and for packs)
    Column("event_seq", BigInteger),
    # how many messages it holds, from idx: more than one is a pack (packs.py, 0023)
    Column("n", Integer, nullable=False, server_default="1"),
)

# Each run's event log, to stream again exactly what its executions reported: a row holds
# the events written together, keyed by the seq of the last, as compact JSON bytes (each
# event `[seq, name, created_at, data]`, its run's ids the row's run_id), kept as written
# (`data`'s keys in their order). SQLite keeps the rows in the key's own b-tree (no rowid):
# a row is stored once.
run_events = Table(
    "run_events",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("data", LargeBinary, nullable=False),
    sqlite_with_rowid=False,
)

# A side-effecting tool call is recorded before it runs and again when it ends, so a
# resumed run never runs it twice: finished calls replay, unfinished ones are in doubt.
tool_calls = Table(
    "tool_calls",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("tool_call_id", Text, primary_key=True),
    Column("started_at", Float, nullable=False),
    Column("result", LargeBinary),  # the tool message, once the call ended
)

# The first answer to a request sent with an Idempotency-Key, replayed to its retries.
# Until it is answered, the claim is `owner`'s until `expires_at` (a lease, renewed while
# the request is under way); a claim without one (made before 0010) has run out.
idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("scope", Text, primary_key=True),
    Column("key", Text, primary_key=True),
    Column("fingerprint", String(64), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("response", LargeBinary),
    Column("owner", String(64)),
    Column("expires_at", Float),
    # the oldest first, for the retention sweep (migration 0018)
    Index("ix_idempotency_keys_created", "created_at"),
)

checkpoints = Table(
    "checkpoints",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("message_index", Integer, primary_key=True, autoincrement=False),
    Column("data", LargeBinary, nullable=False),
    Column("event_seq", BigInteger),  # its boundary's place in the session's event log
    # how many checkpoints it holds, from message_index: more than one is a pack (packs.py)
    Column("n", Integer, nullable=False, server_default="1"),
)

# Lineage: the rows a reader reads that are stored under another run's id (copy-on-write,
# see `Segment`): a fork's inherited segments, and every segment a READY session
# checkpoint's capture reads (reader: the checkpoint's id). A source's messages in [lo, hi)
# and checkpoints in (lo, hi] outlive it while a reader reads them (migration 0015).
run_reads = Table(
    "run_reads",
    metadata,
    Column("source_run_id", String(64), primary_key=True),
    Column("reader", String(64), primary_key=True),
    Column("lo", Integer, primary_key=True, autoincrement=False),
    Column("hi", Integer, nullable=False),
    Index("ix_run_reads_reader", "reader"),
)

# Random secrets of the database (e.g. the key of the cursors the HTTP adapter hands out).
secrets = Table(
    "secrets",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", LargeBinary, nullable=False),
)

# Each team's data key (see plugins/sql/team_keys.py), wrapped (sealed) by the keyring's
# first key: the documents of the team's rows are sealed under it. `runpoint team erase`
# deletes the row, so those documents can never be opened again (migration 0021).
team_keys = Table(
    "team_keys",
    metadata,
    Column("team_id", Text, primary_key=True),
    Column("key_id", String(32), nullable=False, unique=True),
    Column("wrapped", LargeBinary, nullable=False),
)

# Teams erased (their keys deleted): until `removed`, their rows made before `erased_at`
# are still being deleted, in batches (migration 0021).
team_erasures = Table(
    "team_erasures",
    metadata,
    Column("team_id", Text, primary_key=True),
    Column("erased_at", Float, nullable=False),
    Column("removed", Boolean, nullable=False, server_default=false()),
)

# Captures of whole sessions; `seq` orders them (newest first, keyset pages).
session_checkpoints = Table(
    "session_checkpoints",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("checkpoint_id", String(64), nullable=False, unique=True),
    Column("session_id", Text, nullable=False),
    Column("data", LargeBinary, nullable=False),  # the SessionCheckpoint
    Column("capture", LargeBinary),  # the SessionCapture, once READY
    Index("ix_session_checkpoints_session_seq", "session_id", "seq"),
)

# Calls waiting for a person, one row per paused batch (see runpoint.core.approval): the
# document beside the columns an inbox filters on; settled once, from 'pending'.
approvals = Table(
    "approvals",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("run_id", String(64), nullable=False),
    Column("session_id", Text, nullable=False),
    Column("agent_id", Text, nullable=False),
    Column("team_id", Text, nullable=False),
    Column("user_id", Text),
    Column("status", String(16), nullable=False),
    Column("pause_type", String(16), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float),
    Column("data", LargeBinary, nullable=False),
    Index("ix_approvals_team_created", "team_id", "created_at"),
    Index("ix_approvals_run", "run_id"),
    Index("ix_approvals_due", "status", "expires_at"),
)

# Schedules (runpoint.core.schedule): the document, and beside it what the firing loop
# queries and moves on by itself (`enabled`, `next_run_at`: the columns are the truth).
schedules = Table(
    "schedules",
    metadata,
    Column("schedule_id", String(64), primary_key=True),
    Column("team_id", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("enabled", Boolean, nullable=False),
    Column("next_run_at", Float),
    Column("data", LargeBinary, nullable=False),
    # until when a process has taken it to fire its due ticks (migration 0022)
    Column("claimed_until", Float),
    Index("ix_schedules_team_created", "team_id", "created_at"),
    Index("ix_schedules_next_run_at", "next_run_at"),
)

# The runs schedules fired: one per (schedule, tick), its attempts counted (migration 0017).
schedule_runs = Table(
    "schedule_runs",
    metadata,
    Column("schedule_id", String(64), primary_key=True),
    Column("tick", Float, primary_key=True),
    Column("run_id", String(64), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("attempt_at", Float, nullable=False),
    Column("settled", Boolean, nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("deadline", Float),  # its attempt's timeout (migration 0022)
    # partial (PostgreSQL's too: see PARTIAL_INDEXES)
    UNSETTLED := Index(
        "ix_schedule_runs_unsettled", "attempt_at", sqlite_where=text("NOT settled")
    ),
)
PARTIAL_INDEXES = (FORKS, IN_FLIGHT, MEMBERS, UNSETTLED)
