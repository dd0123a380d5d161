"""Pages of rating campaigns: results."""
