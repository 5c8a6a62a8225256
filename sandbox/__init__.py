"""shinken.sandbox"""
