"""Pages for protocols and runs."""
