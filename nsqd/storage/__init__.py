"""Everything under --data-path: the go-diskqueue file queue (diskqueue.py, made of its parts
diskqueue_*.py), the engine's Overflow on it in nsqd's record layout (overflow.py), nsqd.dat
(metadata.py), the record log every append-only file of ours is made of (records.py: journal.py,
dedupe.py, expiries.py, resp_log.py), the one way a file is replaced whole (atomic.py), the
health that a failed write turns NOK and the next good one OK again (health.py), and the store
that owns the directory lock, the one syncer and the metadata writer (store.py). Implements the
engine's ports; the engine never imports it."""
