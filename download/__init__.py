"""shinken.download: fetch the export from the hub and unpack it safely."""
