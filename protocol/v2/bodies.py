"""The bodies of one uniform MPUB (V2, or HTTP /mpub), kept as the batch's own bytes and cut
out on demand.

An MPUB whose bodies all have one size (the common batch) is kept whole: `count` times a 4-byte
size and `size` body bytes. Reading an item or a slice makes the bytes objects then, so a
message that waits in a queue costs no object of its own until it is handed out (allocating
200 bytes objects was a fifth of the daemon's time publishing MPUB 200), and a deep queue holds
one buffer per batch instead of one object per body."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload


def uniform_heads(
    data: bytes | bytearray | memoryview, start: int, end: int, stride: int, width: int
) -> bool:
    """Whether every `width`-byte head from `start` on, one every `stride` bytes up to `end`
    (the last one may be cut by it), equals the first: frames of one size checked a column at
    a time (C-level strided slices) instead of a header at a time."""
    first = bytes(data[start : start + width])
    for k in range(width):
        column = data[start + k : end : stride]
        if column != first[k : k + 1] * len(column):
            return False
    return True


class PackedBodies(Sequence[bytes]):
    """`count` bodies of `size` bytes in `data`, the first at `first`, one every `stride`
    bytes: an MPUB batch (4-byte size before each body), or an HTTP /mpub body of lines
    (`first` 0, newline after each)."""

    __slots__ = ("_count", "_data", "_first", "_size", "_stride", "nbytes")

    def __init__(self, data: bytes, size: int, count: int, first: int = 4, stride: int = 0) -> None:
        self._data = data
        self._size = size
        self._first = first
        self._stride = stride or size + 4
        self._count = count
        self.nbytes = size * count  # the bodies' total length

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> bytes: ...
    @overload
    def __getitem__(self, index: slice) -> list[bytes]: ...

    def __getitem__(self, index: int | slice) -> bytes | list[bytes]:
        data, size, stride, first = self._data, self._size, self._stride, self._first
        if isinstance(index, slice):
            a, b, step = index.indices(self._count)
            if step != 1:
                return [self[i] for i in range(a, b, step)]
            start = first + a * stride
            return [data[p : p + size] for p in range(start, first + b * stride, stride)]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError("PackedBodies index out of range")
        p = first + index * stride
        return data[p : p + size]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self[:])

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, (list, tuple, PackedBodies)):
            return self[:] == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a list, so unhashable as one

    def __repr__(self) -> str:
        return repr(self[:])
