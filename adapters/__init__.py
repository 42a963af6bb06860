"""Adapters: the ways into runpoint's services (HTTP, command line)."""
