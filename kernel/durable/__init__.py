"""What lets work outlive its process: leases (claims, renewals, the lease watch's rules)
and idempotency keys."""
