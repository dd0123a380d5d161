"""Pages of pairwise preference campaigns: create, results."""
