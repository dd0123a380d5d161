"""The pages, by area: projects and data, protocols and runs, predictions, analysis. Each area keeps its views, forms and URLs together."""
