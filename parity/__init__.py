"""parity: contract tests for EAGLE-3 train/serve parity."""

__version__ = "0.1.0"
