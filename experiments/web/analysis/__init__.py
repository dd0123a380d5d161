"""Pages for a run's dashboards and exports."""
