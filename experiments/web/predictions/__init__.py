"""Pages for a run's predictions."""
