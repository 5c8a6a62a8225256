"""shinken.triage"""
