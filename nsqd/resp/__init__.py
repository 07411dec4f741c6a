"""The Redis (RESP2) front-end on --resp-address: lists, strings and hashes with expiry in a
keyspace of its own (durable in resp.log under --data-path), a FIFO blocking engine, and a
bridge to the broker (keys topic:<t> and channel:<t>:<c>; a popping client is an
engine.ports.Consumer). Only nsqd/daemon.py imports it, and only when the flag is set.
README.md, "Redis front-end", says what it does and how it differs from Redis."""
