"""A run's analysis: final grades per condition, the cached dashboard numbers, plotly figures, the numeric export."""
