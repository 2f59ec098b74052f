"""Console views that change state: each validates, calls a service, and redirects or renders."""
