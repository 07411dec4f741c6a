"""RESP (the Redis serialization protocol) as pure code: codec.py parses requests and encodes
replies for the Redis front-end in nsqd/resp. No I/O here."""
