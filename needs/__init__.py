"""shinken.needs: what a task needs, read statically from its bundle (setup steps, setup and
reward scripts, URLs, app types), and the REWARD marker grammar a reward script reports with.

Depends only on shinken.bundles. Triage matches these needs against an image's capabilities
(shinken.triage); the sandbox reads the display evidence (shinken.sandbox.policy) and parses
reward runs with the grammar (shinken.sandbox.forks). Both import it downward.
"""
