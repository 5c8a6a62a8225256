"""`shinken watch`: a read-only live view of a running fork's display in the browser."""
