"""The web console: its page, its files and the reads it makes beside the management API."""
