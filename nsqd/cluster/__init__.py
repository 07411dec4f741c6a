"""Membership of an NSQ cluster: registration with nsqlookupd (lookupd.py), a Hooks listener of
the broker."""
