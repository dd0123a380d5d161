"""Pages of content-check campaigns ("same content?" for paraphrases): create, results."""
