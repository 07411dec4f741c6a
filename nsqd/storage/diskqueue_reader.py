"""A disk queue's reader: records from the read position on, one at a time (`read`) or a run
of whole records read a chunk at a time (`read_framed`, `read_many`), and looked at without
moving (`peek`, `peek_at`). A finished file read to its end is deleted; a damaged record, a
torn tail or a misaligned position moves the reader to the next file, the damaged one saved
as ``.bad``, as go-diskqueue does.

A base of storage/diskqueue.py's DiskQueue (its own methods: no extra call level)."""

from __future__ import annotations

import logging
import os
from typing import IO, Final

from .diskqueue_files import HEADER, READ_BUFFER, remove, spans
from .diskqueue_state import QueueState

# what a run of records is read with at most (below glibc's mmap threshold: no mmap per read)
_RUN_CHUNK: Final = 64 * 1024


class _Corrupt(Exception):  # the read file cannot be trusted from the read position on
    pass


class QueueReader(QueueState):
    """The read file, the read position and what is taken from there."""

    def read(self) -> bytes | None:
        """Next record, or None when the reader has caught up with the writer."""
        with self._lock:
            self._check_open()
            data = self._read()
            if data is not None and self._sync_every <= 1:
                self._position_read()
            return data

    def read_many(self, n: int, max_bytes: int) -> list[bytes]:
        """Up to n records, and no more once they hold `max_bytes` (at least one); fewer
        only then or when the reader has caught up with the writer."""
        return [b[p + 4 : q] for b in self.read_framed(n, max_bytes) for p, q in spans(b)]

    def read_framed(self, n: int, max_bytes: int) -> list[bytes]:
        """read_many's records as the files hold them: blobs of whole framed records
        ([4-byte size][data] each, sizes checked), read a run at a time rather than a
        record at a time; the caller cuts out what it needs (storage/overflow.py)."""
        out: list[bytes] = []
        k, left = 0, max_bytes
        with self._lock:
            self._check_open()
            while k < n and left > 0:
                got, nbytes = self._read_run(out, n - k, left)
                k += got
                left -= nbytes
                if k >= n or left <= 0 or (data := self._read()) is None:
                    break
                # read() took the file's end, a damaged record, the tail
                out.append(HEADER.pack(len(data)) + data)
                k += 1
                left -= len(data)
            if k and self._sync_every <= 1:
                self._position_read()
        return out

    def _read_run(self, out: list[bytes], n: int, max_bytes: int) -> tuple[int, int]:
        """The whole, valid records of the open read file from the read position on, up to
        n, appended to `out` as framed blobs read a chunk at a time; it stops before
        anything read() must judge (the file's end, a damaged record, a record longer than
        a chunk), leaving the file at the read position, or once the records hold
        `max_bytes`. Returns how many records it read and their bytes."""
        self._settle_reader()
        reader = self._reader
        if reader is None:
            return 0, 0
        limit = self._write_pos if self._read_end is None else self._read_end
        pos = self._read_pos
        lo, hi = self._min_msg_size, self._max_msg_size
        unpack = HEADER.unpack_from
        k, left = 0, max_bytes
        while k < n and left > 0 and pos < limit:
            # what the records still wanted need, going by the last one's size: a consumer
            # with little credit must not read a whole chunk per message
            want = min(limit - pos, _RUN_CHUNK, (n - k) * self._record_guess + 4)
            buf = reader.read(want)
            end, p, size, last = len(buf), 0, 0, 0
            while k < n and left > 0 and p + 4 <= end:
                size = unpack(buf, p)[0]
                q = p + 4 + size
                if not lo <= size <= hi or q > end:
                    break
                last = size
                p = q
                k += 1
                left -= size
            reached = pos + end  # where this chunk's read ended
            if p:
                out.append(buf if p == end else buf[:p])
                pos += p
                self._record_guess = last + 4
            if p < end:
                reader.seek(pos)  # back to the first record not taken
                # a record cut by the chunk's end is read by the next chunk; one longer than
                # a chunk, a bad size or the data's end (torn) is read()'s to judge
                cut = lo <= size <= hi and reached < limit
                if not cut:
                    break
            if p == 0:
                break
        if pos == self._read_pos:
            return 0, 0
        self._read_pos = pos
        self._depth -= k
        self._count += k
        if self._read_end is not None and pos >= self._read_end:
            self._finish_read_file()
        if (self._read_file_num, self._read_pos) >= (self._write_file_num, self._write_pos):
            self._check_tail()
        return k, max_bytes - left

    def _read(self) -> bytes | None:
        """The next record (the lock held), judging file ends and damage."""
        while True:
            self._settle_reader()
            if (self._read_file_num, self._read_pos) >= (self._write_file_num, self._write_pos):
                return None
            try:
                data = self._read_one()
            except (OSError, _Corrupt) as exc:
                self._handle_read_error(exc)
                continue
            if data is None:
                self._finish_read_file()
                continue
            self._depth -= 1
            self._count += 1
            if self._read_end is not None and self._read_pos >= self._read_end:
                self._finish_read_file()  # delete the file as soon as its last record is out
            self._check_tail()
            return data

    def peek(self, n: int) -> list[bytes]:
        """Up to n records from the read position on, leaving every position and file as it
        is (a separate read; stops quietly at a damaged record, which read() will handle)."""
        return self.peek_at(n, None)[0]

    def peek_at(self, n: int, at: tuple[int, int] | None) -> tuple[list[bytes], tuple[int, int]]:
        """peek() from `at` (what an earlier peek_at returned; None: the read position), and
        the position after what it gave: a long peek in parts. A position that reads have
        passed since counts as the read position (those records are not queued any more)."""
        out: list[bytes] = []
        with self._lock:
            self._check_open()
            self._flush_quietly()
            read = (self._read_file_num, self._read_pos)
            num, pos = read if at is None or at < read else at
            end_num, end_pos = self._write_file_num, self._write_pos
            while len(out) < n and (num, pos) < (end_num, end_pos):
                try:
                    with open(self._file_name(num), "rb") as f:
                        f.seek(pos)
                        limit = end_pos if num == end_num else os.fstat(f.fileno()).st_size
                        while len(out) < n and pos < limit:
                            head = f.read(4)
                            size = HEADER.unpack(head)[0] if len(head) == 4 else -1
                            if not self._min_msg_size <= size <= self._max_msg_size:
                                return out, (end_num, end_pos)
                            data = f.read(size)
                            if len(data) < size:
                                return out, (end_num, end_pos)
                            out.append(data)
                            pos += 4 + size
                except OSError:
                    return out, (end_num, end_pos)
                if pos < limit:  # n reached inside this file
                    break
                num, pos = num + 1, 0
        return out, (num, pos)

    def _settle_reader(self) -> None:
        """Buffered records are written before the reader, in their file, may reach them
        (or a damaged record there moves the write file on)."""
        if self._pending and self._read_file_num == self._write_file_num:
            self._flush_quietly()

    def _read_one(self) -> bytes | None:
        """One record at the read position, or None at the clean end of a finished file."""
        reader = self._reader or self._open_reader()
        if self._read_end is not None and self._read_pos >= self._read_end:
            if self._read_pos > self._read_end:
                raise _Corrupt(f"read position beyond the end of the file ({self._read_end})")
            return None
        header = reader.read(4)
        if len(header) < 4:
            raise _Corrupt("unexpected end of file")
        (size,) = HEADER.unpack(header)
        if not self._min_msg_size <= size <= self._max_msg_size:
            raise _Corrupt(f"invalid message read size ({size})")
        data = reader.read(size)
        if len(data) < size:
            raise _Corrupt("unexpected end of file")
        end = self._read_pos + 4 + size
        limit = self._write_pos if self._read_end is None else self._read_end
        if end > limit:  # misaligned position: the "length" was read from inside a record
            raise _Corrupt(f"record ends at {end}, past the end of the data at {limit}")
        self._read_pos = end
        return data

    def _open_reader(self) -> IO[bytes]:
        path = self._file_name(self._read_file_num)
        reader = open(path, "rb", buffering=READ_BUFFER)  # noqa: SIM115 (kept open)
        if self._read_pos:
            reader.seek(self._read_pos)
        if self._read_end is None and self._read_file_num < self._write_file_num:
            self._read_end = os.fstat(reader.fileno()).st_size  # the writer is done with it
        self._logf(logging.DEBUG, "opened %s for reading", path)
        self._reader = reader
        return reader

    def _finish_read_file(self) -> None:
        remove(self._file_name(self._read_file_num), self._log)
        self._next_read_file()

    def _next_read_file(self) -> None:
        self._close_reader()
        self._read_file_num += 1
        self._read_pos = 0
        self._dirty = True

    def _handle_read_error(self, exc: BaseException) -> None:
        path = self._file_name(self._read_file_num)
        self._logf(logging.ERROR, "reading at %d of %s - %s", self._read_pos, path, exc)
        if self._read_file_num == self._write_file_num:
            # The file being written is unreadable: do not add to it either.
            self._close_write_fd()
            self._write_file_num += 1
            self._write_pos = 0
        self._logf(logging.WARNING, "jump to next file and saving bad file as %s.bad", path)
        try:
            os.replace(path, path + ".bad")
        except OSError as err:
            self._logf(logging.ERROR, "failed to rename %s to .bad - %s", path, err)
        self._next_read_file()
        self._check_tail()
