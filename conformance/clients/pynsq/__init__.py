"""The client conformance checks written with pynsq 0.9.1 (tornado 6).

Run as ``python -m conformance.clients.pynsq --nsqd 127.0.0.1:4150 [--check all|NAME,...]``;
same checks, criteria and RESULT lines as the go-nsq and nsqjs programs next to it.
"""
