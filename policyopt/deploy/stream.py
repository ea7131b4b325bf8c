"""The stream a publisher reads: readings so far as a CSV in time order, or a partitioned Parquet data set read slot by
slot (spilled to one file per input slot, never held whole).

:class:`~policyopt.deploy.publisher.Publisher` takes either; the checks here (time never goes back, the schema) run
before any release is planned.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

from policyopt.errors import InvalidInputError

__all__ = ["read_stream_csv", "check_stream_order", "ParquetStream", "spill_files", "SpilledSlots"]


def read_stream_csv(path, option: str = "--data"):
    """Read the stream so far (long CSV ``user,time,value``), checking that time never goes back.

    Parameters
    ----------
    path : str or Path
    option : str
        Option name for messages.

    Returns
    -------
    pandas.DataFrame
        Rows in file order, columns user (str), time (int64), value (float64).

    Raises
    ------
    InvalidInputError
        Whatever :func:`policyopt.io.read_readings_csv` raises (missing file, bad field, NaN,
        duplicate), and a user whose times do not increase down the file (with line numbers).
    """
    from policyopt.io import read_readings_csv

    df = read_readings_csv(path, option, sort=False)  # validates every line, times as exact integers
    check_stream_order(df, f"{option} {str(path)!r}")
    return df


def check_stream_order(df, source: str = "`readings`") -> None:
    """Raise if some user's times do not strictly increase in row order (the stream went back).

    Raises
    ------
    InvalidInputError
        Naming the user, the two times and their lines (header = line 1).
    """
    # int64 throughout: a plain shift() gives float64 (NaN for each user's first row), whose 53-bit mantissa makes
    # distinct times ≥ 2⁵³ (e.g. 10¹⁷ + 1 after 10¹⁷) compare equal — "time goes backwards" for a valid stream
    prev = df.groupby("user", sort=False)["time"].shift(fill_value=np.iinfo(np.int64).min).to_numpy(dtype=np.int64)
    bad = df["time"].to_numpy(dtype=np.int64) <= prev
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        user = df["user"].iloc[i]
        j = int(np.flatnonzero((df["user"] == user).to_numpy()[:i])[-1])
        raise InvalidInputError(
            f"{source} line {i + 2}: time goes backwards for user {user!r} ({int(df['time'].iloc[i])} after "
            f"{int(df['time'].iloc[j])} on line {j + 2}); a stream only grows forward in time"
        )


class ParquetStream:
    """A partitioned Parquet data set of readings (user, time, value) read slot by slot, never whole.

    :meth:`span` scans the ``time`` column only; :meth:`spill` writes the rows of the input slots
    to one temporary folder per slot in one filtered scan, from which the publisher reads one
    slot at a time: memory holds a few files' batches and one slot's readings, not the stream.
    The files are the same as ``policyopt schedule --data`` reads (:func:`policyopt.io.parquet_files`).

    Parameters
    ----------
    spec : str or Path
        A directory, glob pattern or Parquet file.
    option : str
        Option name for messages.
    client : distributed.Client, optional
        A Dask client: :meth:`spill` then runs one task per file on its workers (which need
        policyopt, the files and the temporary folder at the same paths), else in this process.

    Raises
    ------
    InvalidInputError
        No file, or a schema other than user, time, value (:func:`policyopt.io.check_parquet_schema`).
    """

    def __init__(self, spec, option: str = "--data", client=None):
        import pyarrow.dataset as ds

        from policyopt.io import check_parquet_schema, parquet_files

        self.spec, self.option, self.client = str(spec), option, client
        self.files = parquet_files(spec, option)
        self.source = f"{option} {self.spec!r}"
        try:
            self.dataset = ds.dataset([str(f) for f in self.files], format="parquet")
        except Exception as exc:  # pyarrow raises ArrowInvalid / OSError on a file that is not Parquet
            raise InvalidInputError(f"{self.source} is not a readable Parquet data set: {' '.join(str(exc).split())}") from None
        check_parquet_schema(self.dataset.schema, self.source)

    def span(self) -> tuple[int, int]:
        """(first, last) time slot of the data set, scanning the ``time`` column batch by batch.

        Raises
        ------
        InvalidInputError
            If the data set holds no reading or a null time.
        """
        import pyarrow.compute as pc

        lo = hi = None
        for batch in self.dataset.to_batches(columns=["time"]):
            if batch.num_rows == 0:
                continue
            col = batch.column(0)
            if col.null_count:
                raise InvalidInputError(f"{self.source}: a reading has no `time`")
            mm = pc.min_max(col).as_py()
            lo = mm["min"] if lo is None else min(lo, mm["min"])
            hi = mm["max"] if hi is None else max(hi, mm["max"])
        if lo is None:
            raise InvalidInputError(f"{self.source} holds no readings")
        return int(lo), int(hi)

    @contextlib.contextmanager
    def spill(self, times, directory=None, rows_per_group: int = 1 << 14):
        """The readings of the given time slots, partitioned by slot into a temporary directory.

        One filtered scan of the data set (:func:`spill_files`; with a Dask client one task per
        file on the workers) writes the rows into one folder per slot, in row groups of at most
        `rows_per_group` rows, so memory holds a few row groups per open slot, not the stream.  The
        folder is removed when the context ends.

        Parameters
        ----------
        times : iterable of int
            The input slots to keep.
        directory : str, optional
            Where to create the temporary folder (default: the system's).
        rows_per_group : int
            Largest row group written (bounds the writer's buffers).

        Yields
        ------
        SpilledSlots
            ``get(slot, default)`` → (users: pyarrow string array, values: float64 array) of one slot.

        Raises
        ------
        InvalidInputError
            A non-integral time or a value that is not a number (from Arrow's safe casts).
        """
        import tempfile

        times = sorted({int(t) for t in times})
        with tempfile.TemporaryDirectory(prefix="policyopt-slots-", dir=directory) as tmp:
            if times and self.client is not None:  # one task per file on the Dask workers, each writing its own parts
                k = len(self.files)
                futures = self.client.map(spill_files, [[str(f)] for f in self.files], [tmp] * k, [times] * k,
                                          [self.source] * k, [rows_per_group] * k, [f"f{i}" for i in range(k)], pure=False)
                self.client.gather(futures)
            elif times:
                spill_files([str(f) for f in self.files], tmp, times, self.source, rows_per_group)
            yield SpilledSlots(tmp, self.source)


def spill_files(files, tmp, times, source: str, rows_per_group: int = 1 << 14, tag: str = "part") -> None:
    """Write the rows of `files` at the slots `times` into ``tmp/<slot>/<tag>-<i>.parquet`` (one filtered scan).

    Columns are cast to user: string, time: int64 (safe cast: a non-integral time is refused),
    value: float64; row groups of at most `rows_per_group` rows bound the writer's buffers.  A Dask
    task of :meth:`ParquetStream.spill` (module level, so workers can import it).

    Raises
    ------
    InvalidInputError
        A non-integral time or a value that is not a number (from Arrow's safe casts).
    """
    import pyarrow as pa
    import pyarrow.dataset as ds

    dataset = ds.dataset(list(files), format="parquet")
    wanted = pa.array(sorted(times), type=pa.int64()).cast(dataset.schema.field("time").type)
    columns = {"user": ds.field("user").cast(pa.string()), "time": ds.field("time").cast(pa.int64()),
               "value": ds.field("value").cast(pa.float64())}
    try:
        scanner = dataset.scanner(columns=columns, filter=ds.field("time").isin(wanted))
        ds.write_dataset(scanner, tmp, format="parquet", partitioning=["time"], basename_template=f"{tag}-{{i}}.parquet",
                         max_partitions=len(times) + 1, max_rows_per_group=rows_per_group,
                         min_rows_per_group=rows_per_group // 4, max_open_files=min(len(times) + 1, 512),
                         use_threads=False, existing_data_behavior="overwrite_or_ignore")
    except pa.ArrowException as exc:
        raise InvalidInputError(f"{source}: {' '.join(str(exc).split())[:300]}") from None


class SpilledSlots:
    """One folder per slot written by :meth:`ParquetStream.spill`; each slot read and checked on demand."""

    def __init__(self, root, source: str):
        self.root, self.source = Path(root), source

    def get(self, slot: int, default=(None, None)):
        """(users, values) of `slot`: a pyarrow string array and a float64 array, or `default` without a reading.

        Raises
        ------
        InvalidInputError
            A null user, a value that is not finite, or a user with two readings in the slot.
        """
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        folder = self.root / str(int(slot))
        if not folder.is_dir():
            return default
        table = pq.read_table(folder, columns=["user", "value"])
        users, col = table.column("user").combine_chunks(), table.column("value").combine_chunks()
        if users.null_count or col.null_count:
            raise InvalidInputError(f"{self.source}: a reading at time {slot} has no user or no value")
        values = col.to_numpy(zero_copy_only=False)
        if not np.all(np.isfinite(values)):
            raise InvalidInputError(f"{self.source}: a value at time {slot} is not a finite number (NaN readings are not allowed)")
        if pc.count_distinct(users).as_py() != len(users):
            raise InvalidInputError(f"{self.source}: a user has a second reading at time {slot}")
        return users, values
