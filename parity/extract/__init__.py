"""Extractors: derive the actual contract of each side from the installed code, by running it."""
