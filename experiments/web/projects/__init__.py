"""Pages for projects, imported sessions, tasks and cohorts."""
