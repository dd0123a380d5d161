"""Finding predictions: the run explorer, search within a project, and cross-run comparison."""
