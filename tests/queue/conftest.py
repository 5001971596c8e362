"""The queue tests' own fixture: ``retrying`` (see ``retrying``)."""

from .retrying import retrying

__all__ = ["retrying"]
