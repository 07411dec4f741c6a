"""Differential conformance suite: the same scripted V2 sessions against the real nsqd v1.3.0
and ours, their transcripts compared frame by frame. See conformance/README.md."""
