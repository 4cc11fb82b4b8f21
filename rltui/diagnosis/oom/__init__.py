"""OOM triage (pure): read the OOM, find the phase, and turn it into config changes.

``numbers`` maps a log event to ``OomNumbers``; ``phase`` decides the training phase from the
traceback and the lines before it; ``frameworks`` knows the frameworks' keys, defaults and
constraints; ``estimate`` computes memory from the model's shape; ``suggest`` ranks the changes
and writes the patch. ``triage`` (in ``report``) puts them together.
"""
