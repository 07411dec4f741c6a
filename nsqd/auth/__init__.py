"""AUTH through an HTTP auth server, as nsqd v1.3.0 (nsqd/client_v2.go, internal/auth).

A client sends `AUTH <secret>`; nsqd asks one of the --auth-http-address servers (random
rotation, the next one on failure)

    GET http://<addr>/auth?common_name=<cn>&remote_ip=<ip>&secret=<secret>&tls=true|false
    Accept: application/vnd.nsq; version=1.0

(a full URL is used as given when the address contains "://") and caches the answer

    {"ttl": 3600, "identity": "..", "identity_url": "..",
     "authorizations": [{"topic": "<regex>", "channels": ["<regex>"],
                         "permissions": ["subscribe", "publish"]}]}

for `ttl` seconds. PUB/MPUB/DPUB need a "publish" authorization whose topic regex matches and
one of whose channel regexes matches the empty string; SUB needs "subscribe", the topic and
the channel. The first check after the TTL has passed asks the auth server again.

grants.py parses the answer and checks it, authd.py asks the servers, session.py is one
connection's AUTH state.

Differences from Go, documented rather than hidden:
* Regexes are RE2 on both sides (gocompat/regex.py: RE2's own engine, linear time, with Go's
  syntax where RE2's C++ parser differs), but a pattern whose compiled program passes RE2's
  default budget (a Unicode class repeated hundreds of times: `\\pL{1000}`) is invalid here
  (AUTH failed) where nsqd takes it; see gocompat/regex.py for that and the approximation of
  Go's nesting limit.
* The cache expiry uses the monotonic clock (nsqd: the wall clock)."""
