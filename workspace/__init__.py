"""shinken.workspace"""
