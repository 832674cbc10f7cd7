"""Trainers: what each training stack feeds the draft, one folder per trainer."""
