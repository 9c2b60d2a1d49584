"""Git backup provider for Smriti (``BACKUP_TYPE=git``, alias ``github``)."""
