"""Console views, one module per section of the navigation."""
