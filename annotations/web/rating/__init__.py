"""Pages of rating campaigns: rating."""
