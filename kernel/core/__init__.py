"""The base every layer shares: the domain types, errors, tenancy, the transcript's rules,
group commit, and a cancel told from a failure (`cancels`). Imports nothing of runpoint's
above it."""
