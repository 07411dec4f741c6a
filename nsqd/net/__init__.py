"""Networking shared by the front-ends: listeners (listeners.py) and the byte-stream transports
with their timeouts (transport.py)."""
