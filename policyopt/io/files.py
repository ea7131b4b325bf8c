"""Files a user gives: existence and size checks, text reading, digests of file prefixes; files policyopt writes
whole: :func:`atomic_write`."""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
from pathlib import Path

from policyopt.errors import InvalidInputError, fmt

__all__ = ["MAX_FILE_BYTES", "existing_file", "read_text", "file_prefix_sha256", "atomic_write"]

#: Largest input file read (bytes), checked before reading: 2 GiB.
MAX_FILE_BYTES = 2 * 1024**3


def existing_file(path, option: str) -> Path:
    """`path` as a Path of an existing file of at most :data:`MAX_FILE_BYTES`, or :class:`InvalidInputError` naming
    `option` (a missing file, a name the file system refuses, a file too large)."""
    p = Path(path)
    try:
        is_file = p.is_file()
    except OSError as exc:  # e.g. a name longer than the file system allows
        raise InvalidInputError(f"{option} {fmt(str(p))} is not a usable file name ({exc.strerror})") from None
    if not is_file:
        raise InvalidInputError(f"{option} file not found: {fmt(str(p))}")
    size = p.stat().st_size
    if size > MAX_FILE_BYTES:
        raise InvalidInputError(f"{option} {fmt(str(p))} is {size} bytes; at most {MAX_FILE_BYTES} are read")
    return p


def read_text(path, option: str) -> str:
    """The text of a user file, decoded strictly: UTF-8 (a UTF-8 or UTF-16 byte-order mark is honoured).

    Parameters
    ----------
    path : str or Path
    option : str
        Option name for messages.

    Returns
    -------
    str
        The decoded text (byte-order mark removed).

    Raises
    ------
    InvalidInputError
        Missing file, a file larger than :data:`MAX_FILE_BYTES`, a binary file (NUL bytes without a UTF-16
        byte-order mark) or bytes that are not UTF-8 (the message gives the offset of the first bad byte).
    """
    p = existing_file(path, option)
    raw = p.read_bytes()
    name = fmt(str(p))
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return raw.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise InvalidInputError(f"{option} {name} starts with a UTF-16 byte-order mark but is not valid UTF-16 "
                                    f"(byte {exc.start}); save it as UTF-8 text") from None
    if b"\x00" in raw:
        raise InvalidInputError(f"{option} {name} is a binary file (NUL byte at offset {raw.index(0)}); "
                                "expected UTF-8 text")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{option} {name} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                                f"{exc.start}); save it as UTF-8") from None


#: Bytes read at a time when hashing a file.
_HASH_CHUNK = 1 << 20


def file_prefix_sha256(path, nbytes: int | None = None) -> str:
    """SHA-256 (hex) of the first `nbytes` bytes of a file (all of it when ``None``), read in chunks.

    Parameters
    ----------
    path : str or Path
    nbytes : int, optional
        How many leading bytes to hash; a shorter file hashes what it has.

    Returns
    -------
    str
        64 hex digits.
    """
    import hashlib

    h = hashlib.sha256()
    left = math.inf if nbytes is None else int(nbytes)
    with open(path, "rb") as fh:
        while left > 0:
            chunk = fh.read(int(min(_HASH_CHUNK, left)))
            if not chunk:
                break
            h.update(chunk)
            left -= len(chunk)
    return h.hexdigest()


def _umask_mode() -> int:
    """0666 under the process's umask: the mode ``open()`` gives a new file."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_CREATE_MODE = _umask_mode()


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write `data` (UTF-8 text or bytes) to `path` whole: a unique temporary file in the same folder, synced, renamed.

    A reader sees the old file or the new one, never part of one; runs writing the same path at once leave one of
    their files.  The new file gets the mode any new file gets (0666 under the umask), not ``mkstemp``'s 0600.

    Raises
    ------
    OSError
        The folder cannot be written (the temporary file is removed).
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _CREATE_MODE)
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
