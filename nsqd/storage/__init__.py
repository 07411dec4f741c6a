"""Everything under --data-path: the go-diskqueue file queue (diskqueue.py), the engine's Overflow
on it in nsqd's record layout (overflow.py), nsqd.dat (metadata.py), and the store that owns the
directory lock, the fsync policy and the metadata writer (store.py). Implements the engine's
ports; the engine never imports it."""
