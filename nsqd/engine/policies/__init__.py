"""Queue policies nsqd does not have: per-topic and per-channel attributes (attributes.py) and
what they do at the engine's named points (policy.py: admit, hand out, retry, sweep)."""
