"""pyarrow tables and columns as polars frames and series, typed (the merge's steps move between both)."""

from __future__ import annotations

from typing import cast

import polars as pl
import pyarrow as pa


def frame(table: pa.Table) -> pl.DataFrame:
    """A pyarrow table as a polars DataFrame (pyarrow is untyped here, so polars' overloads of `from_arrow`
    cannot tell a table, which gives a DataFrame, from an array)."""
    return cast(pl.DataFrame, pl.from_arrow(table))


def series(array: pa.ChunkedArray) -> pl.Series:
    """A pyarrow column as a polars Series (see `frame`)."""
    return cast(pl.Series, pl.from_arrow(array))
