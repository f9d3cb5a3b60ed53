"""Arrays sent between the services as base64 of their raw little-endian bytes: a clause vector of
384 float16 values is 1 kB this way, against about 8 kB of JSON numbers (and JSON's float parsing and
printing, which cost more than the model on a batch of notes)."""

from __future__ import annotations

import base64
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

DTYPES = ("float16", "float32", "int32", "int64")


class PackedArray(BaseModel):
    """One C-ordered array: its dtype, its shape, its bytes (little-endian) in base64."""

    model_config = ConfigDict(extra="forbid")

    dtype: Literal["float16", "float32", "int32", "int64"] = Field(description="Element type.")
    shape: list[int] = Field(min_length=1, max_length=2, description="[rows] or [rows, columns].")
    data: str = Field(description="Base64 of the elements' little-endian bytes, row after row.")

    @model_validator(mode="after")
    def _size_fits(self) -> PackedArray:
        if any(s < 0 for s in self.shape):
            raise ValueError(f"shape {self.shape} has a negative size")
        expected = int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize
        if len(self.data) != 4 * -(-expected // 3):  # base64 of n bytes is 4 * ceil(n / 3) characters
            raise ValueError(f"data holds {len(self.data)} base64 characters, not those of {self.shape} {self.dtype}")
        return self

    @classmethod
    def of(cls, array: np.ndarray) -> PackedArray:
        """`array` (one of DTYPES) as sent: its exact values."""
        a = np.ascontiguousarray(array)
        if a.dtype.name not in DTYPES:
            raise ValueError(f"cannot pack {a.dtype}: one of {', '.join(DTYPES)}")
        return cls(dtype=a.dtype.name, shape=list(a.shape),
                   data=base64.b64encode(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()).decode("ascii"))

    def array(self) -> np.ndarray:
        """The array sent, in native byte order."""
        raw = np.frombuffer(base64.b64decode(self.data), dtype=np.dtype(self.dtype).newbyteorder("<"))
        return raw.astype(self.dtype).reshape(self.shape)
