"""The broker: topics, channels, messages, in-flight and deferred sets, queues and the scan
sweep, behind the one API every front-end calls (broker.py). Synchronous, no sockets, no disk,
no HTTP: it talks out through the small interfaces of ports.py."""
