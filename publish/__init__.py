"""shinken.publish: the curated dataset on the Hugging Face hub, with its provenance."""
