"""Wire formats as pure code (sans-IO, like h11): no event loop, sockets, clocks or logging.

v2/ is the NSQ V2 protocol (what the daemon and its clients speak), lookup.py the nsqlookupd V1
codec; resp/ the RESP codec of the Redis front-end."""
