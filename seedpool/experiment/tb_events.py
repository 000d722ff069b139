"""TensorBoard event files for scalars, written in the calling thread at a few microseconds each.

`torch.utils.tensorboard.SummaryWriter` spends most of its CPU per scalar in TensorBoard's
pure-Python CRC32C and in a writer thread that competes for the GIL: on MinAtar, where Ape-X
finishes hundreds of episodes a second, that cost a visible share of the run's samples
(issue 19's profile). A scalar event is a few dozen bytes of protocol buffer, encoded here by
hand, framed as TensorBoard's record format (length, masked CRC32C of the length, data,
masked CRC32C of the data) with a compiled CRC32C, and appended to a buffered file.

The files are what SummaryWriter writes for ``add_scalar`` (``simple_value`` summaries, a
``brain.Event:2`` version record first, a ``SessionLog.START`` at the purge step of a resumed
run), read by TensorBoard as usual (``tests/test_experiment.py`` reads them back with its
event loader).
"""
from __future__ import annotations

import itertools
import os
import socket
import struct
import time
from pathlib import Path

import numpy as np
from numba import njit


def _crc32c_table() -> np.ndarray:
    table = np.zeros(256, np.uint32)
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table[i] = crc
    return table


_TABLE = _crc32c_table()
_FILE_IDS = itertools.count()  # tells apart files a process opens within one second


@njit(cache=True, nogil=True)
def _crc32c(data: np.ndarray, table: np.ndarray) -> int:
    crc = np.uint32(0xFFFFFFFF)
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> np.uint32(8))
    return crc ^ np.uint32(0xFFFFFFFF)


def masked_crc32c(data: bytes) -> int:
    """TensorFlow's masked CRC32C of ``data`` (the checksum of the record format)."""
    crc = int(_crc32c(np.frombuffer(data, np.uint8), _TABLE))
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        bits = n & 0x7F
        n >>= 7
        if n:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protocol-buffer field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _event(step: int, body: bytes, wall_time: float | None = None) -> bytes:
    """An Event: wall_time (1, double), step (2, int64), then one of its payload fields."""
    wall = time.time() if wall_time is None else wall_time
    return b"\x09" + struct.pack("<d", wall) + b"\x10" + _varint(step) + body


def scalar_event(tag: str, value: float, step: int, wall_time: float | None = None) -> bytes:
    """An Event holding Summary{value: [Value{tag, simple_value}]} (what add_scalar writes)."""
    value_msg = _field(1, tag.encode()) + b"\x15" + struct.pack("<f", value)
    return _event(step, _field(5, _field(1, value_msg)), wall_time)


def record(data: bytes) -> bytes:
    """``data`` framed as one record of an event file."""
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data))


class EventFileWriter:
    """Scalars into a new ``events.out.tfevents.*`` file in ``log_dir``.

    ``purge_step``: a resumed run's first step; TensorBoard then drops events of earlier files
    at or after it (the rows a crashed segment wrote past its last checkpoint)."""

    def __init__(self, log_dir: str | Path, purge_step: int | None = None) -> None:
        log_dir = Path(log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}.{next(_FILE_IDS)}"
        self.path = log_dir / name
        self._file = open(self.path, "xb")
        self._file.write(record(_event(0, _field(3, b"brain.Event:2"))))
        if purge_step is not None:
            self._file.write(record(_event(purge_step, _field(7, b"\x08\x01"))))  # SessionLog{status: START}
        self._file.flush()

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self._file.write(record(scalar_event(tag, value, step)))

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
