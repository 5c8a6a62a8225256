"""shinken.cli"""
