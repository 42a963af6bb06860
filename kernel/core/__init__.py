"""The base every layer shares: the domain types, errors, tenancy, the transcript's rules
and group commit. Imports nothing of runpoint's above it."""
