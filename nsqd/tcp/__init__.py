"""The NSQ V2 TCP front-end: the listener (server.py), one connection per client that is a
Consumer of its channel (connection.py), what each command does (commands.py), the TLS, snappy
and deflate upgrades (upgrade.py, streams.py) and a client's /stats entry (stats.py)."""
