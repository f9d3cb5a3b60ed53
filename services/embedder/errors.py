"""Typed errors of the embedder core; the app maps them to 4xx, the worker lets them fail the job."""

from __future__ import annotations


class EmbedderInputError(ValueError):
    """The request or job cannot be done as asked (bad model, empty dataset, too large)."""


class UnknownModelError(EmbedderInputError):
    """No such local model directory, and no cached hub id of that name."""


class ModelFileError(RuntimeError):
    """A shipped model's file is missing, truncated, corrupt or not the recorded one (names the file)."""


class EmptyDatasetError(EmbedderInputError):
    """The snapshot has no documents."""


class RequestTooLargeError(EmbedderInputError):
    """A query embedding request over the service's limits."""


class RunSpecMismatchError(EmbedderInputError):
    """The run's prefix holds shards computed with another spec; resuming would mix them."""


class RunCancelledError(RuntimeError):
    """`should_stop` asked the run to stop; the finished shards stay and a rerun resumes."""
