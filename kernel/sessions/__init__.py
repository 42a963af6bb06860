"""Sessions as a whole: their lifecycle (create, rename, delete, lock, roll back) and
durable session checkpoints."""
