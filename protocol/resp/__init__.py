"""RESP (the Redis serialization protocol) as pure code: codec.py parses requests and encodes
replies for the Redis front-end in nsqd/resp, replies.py holds the reply types where RESP2 and
RESP3 differ. No I/O here."""
