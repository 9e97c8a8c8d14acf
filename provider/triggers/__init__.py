"""Deferrable triggers (importable by a real triggerer: triggers never live in DAG files)."""
