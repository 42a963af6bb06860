"""What lets work outlive its process: leases (claims, renewals, the lease watch's rules),
idempotency keys, outages, and the retention sweeper."""

# Here, not in their modules: `runpoint serve` states them as its defaults without importing
# the modules.
LEASE_SECONDS = 30.0  # how long a run executing in a process is held before another may resume it
SWEEP_SECONDS = 60.0  # between retention sweeps
SWEEP_BATCH = 200  # finished runs a retention sweep reads at most
RETAIN_KEYS = 86400.0  # seconds an answered Idempotency-Key is kept (retries come sooner)
