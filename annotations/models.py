# Rating campaigns, assignments and human grades arrive with the ratings issue.
