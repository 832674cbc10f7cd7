"""Engines: what each serving engine feeds the draft, one folder per engine."""
