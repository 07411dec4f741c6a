"""End-to-end tests against a real nsqd process (ours and the Go reference)."""
