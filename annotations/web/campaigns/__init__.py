"""Pages of rating campaigns: campaigns."""
