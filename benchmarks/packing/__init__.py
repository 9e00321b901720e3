"""Packed training: how many towers K a pack should have per batch size, and the runs per hour it gives."""
