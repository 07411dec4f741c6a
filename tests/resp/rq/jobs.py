"""The jobs the python-rq check enqueues (imported by the worker by name)."""


def add(a, b):
    return a + b


def boom():
    raise ValueError("boom")
