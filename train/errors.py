"""Errors of the training package. All are ValueErrors raised before any training starts."""
from __future__ import annotations


class TrainInputError(ValueError):
    """Training data cannot be used as given; the message names the file, the row and the field."""


class TrainConfigError(ValueError):
    """A training config is invalid or cannot run on this machine; the message names the field."""
