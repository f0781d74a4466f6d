"""Errors raised for bad user input.

`BertKerasError` carries a one-line message naming what was wrong (file, field,
value).  The CLI prints it without a traceback and exits non-zero.
"""


class BertKerasError(ValueError):
    """Bad input: a missing file, a malformed config, a shape mismatch, ..."""


class CheckpointError(BertKerasError):
    """A checkpoint folder or weights file that cannot be loaded."""


class DataError(BertKerasError):
    """A data file that cannot be read (missing, malformed row, unknown label)."""
