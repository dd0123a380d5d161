"""Rater invites: the owners' invite pages, the public accept page, completion codes."""
