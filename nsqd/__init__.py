"""The nsqd daemon on Trio."""
