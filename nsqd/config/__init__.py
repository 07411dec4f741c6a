"""nsqd's options: the flag table with Go's names, defaults and types, config-file keys, and the
validated Options object (options.py)."""
