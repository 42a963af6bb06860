"""What lets work outlive its process: leases (claims, renewals, the lease watch's rules)
and idempotency keys."""

# Here, not in leases.py: `runpoint serve` states it as its default without importing them.
LEASE_SECONDS = 30.0  # how long a run executing in a process is held before another may resume it
