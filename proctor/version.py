"""Proctor's version; part of every baseline cache key and reward record."""

__version__ = "0.1.0"
