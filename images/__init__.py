"""shinken.images"""
