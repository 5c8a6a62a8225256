"""shinken.probes"""
