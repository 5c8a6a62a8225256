"""shinken.triage: static runnable / blocked / defective verdicts for task bundles
against an image's capability manifest (docs/triage.md).

    from shinken.triage import Capabilities, triage_root, build_report
    caps = Capabilities.from_manifest(manifest)          # shinken.images.capabilities.get_manifest(ref)
    run = triage_root("tasks/", caps, mock_urls=None)     # run.tasks: report task dicts, run.stats
"""

from shinken.triage.codes import CLASSES, CODES, VERDICTS
from shinken.triage.evaluate import Capabilities
from shinken.triage.report import build_report
from shinken.triage.run import TriageRun, triage_root

__all__ = ["CLASSES", "CODES", "VERDICTS", "Capabilities", "TriageRun", "build_report", "triage_root"]
