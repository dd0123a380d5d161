"""Pages of rating campaigns, one package per area (campaigns, rating, results)."""
