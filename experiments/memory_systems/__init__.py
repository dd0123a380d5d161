"""Memory systems of the paper's App. H run as deployed (no Django): `mem0_store` holds Mem0."""
