"""Differential suite for the Redis front-end: the same command scripts against a real
redis-server 7 and against ours, raw RESP replies compared byte for byte (see docs/redis.md)."""
