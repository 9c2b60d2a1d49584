"""S3 backup provider for Smriti (``BACKUP_TYPE=s3``)."""
