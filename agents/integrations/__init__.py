"""Adapters to other training frameworks (trl)."""
