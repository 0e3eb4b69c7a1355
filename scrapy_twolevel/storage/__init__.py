"""Storage backends behind the pure core's queue and seen-set interfaces (SQLite today)."""
