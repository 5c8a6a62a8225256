"""`shinken report`: one static HTML page (and a Markdown summary) of a triage, probe and profile run."""
