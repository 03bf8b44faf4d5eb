"""Runtimes."""
