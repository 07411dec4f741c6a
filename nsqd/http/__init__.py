"""nsqd's HTTP API: the routes (routes.py) over handlers by concern (publish, admin, info), V1
requests and answers (v1.py), served by a small HTTP/1.1 server (server.py) whose parser sits behind
parser.py, and what Go's net/http says to bad requests (gonet.py)."""
