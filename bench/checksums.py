"""The checksums a workload prints so that a runner can prove both implementations read the same
numbers: ``Checksum`` over every value read, ``meta_checksum`` over the metadata answers.
Stdlib only at import time (numpy is imported when a ``Checksum`` is made)."""

from __future__ import annotations

import collections
import hashlib
import json
import zlib


class Checksum:
    """CRC-32 over the raw bytes (C order) of every value read, in read order, plus dtype/shape counts.

    Kept cheap (about 1-2 us a value): a C-contiguous ndarray goes straight into zlib.crc32 through
    the buffer protocol, and dtype/shape are only recorded when they change.  The value workloads
    call it outside their timed reads and time it apart (``checksum_s``).
    """

    def __init__(self) -> None:
        import numpy  # after the implementation's import, so it does not count as that import

        self._asarray = numpy.asarray
        self.crc = 0
        self.n = 0
        self.kinds: collections.Counter = collections.Counter()
        self._sig = None
        self._run = 0

    def add(self, value) -> None:
        try:
            sig = (value.dtype, value.shape)
            crc = zlib.crc32(value, self.crc)  # BufferError unless C-contiguous
        except (AttributeError, BufferError, TypeError, ValueError):
            a = self._asarray(value)
            sig = (a.dtype, a.shape)
            crc = zlib.crc32(a.tobytes(order="C"), self.crc)
        self.crc = crc
        self.n += 1
        if sig != self._sig:
            self._flush()
            self._sig = sig
        self._run += 1

    def _flush(self) -> None:
        if self._run:
            dtype, shape = self._sig
            self.kinds[(dtype.str, tuple(shape))] += self._run
        self._run = 0

    def digest(self) -> str:
        self._flush()
        self._sig = None
        kinds = ",".join(f"{d}{list(s)}x{c}" for (d, s), c in sorted(self.kinds.items()))
        return f"crc32={self.crc:08x};n={self.n};{kinds}"


def mode_name(m) -> str:
    return str(getattr(m, "name", m))


def meta_checksum(steps, names, modes=None, workers=None) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([list(map(int, steps)), list(names)]).encode())
    if modes is not None:
        h.update(json.dumps(sorted(mode_name(m) for m in modes)).encode())
    if workers is not None:
        h.update(json.dumps(list(workers)).encode())
    return h.hexdigest()[:16]
