"""The STORAGES setting for REPORT_STORAGE: where report outputs ("default") and purge exports
("archive") live. Shared by the settings module and the tests that switch backends."""

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

STATIC = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
S3_BACKEND = "storages.backends.s3.S3Storage"
FILESYSTEM_BACKEND = "django.core.files.storage.FileSystemStorage"


def storages_setting(backend: str, *, archive_dir: Path, bucket: str = "", location: str = "") -> dict:
    if backend == "filesystem":
        return {
            "default": {"BACKEND": FILESYSTEM_BACKEND},  # MEDIA_ROOT
            "archive": {"BACKEND": FILESYSTEM_BACKEND, "OPTIONS": {"location": archive_dir}},
            "staticfiles": STATIC,
        }
    if backend == "s3":
        if not bucket:
            raise ImproperlyConfigured("REPORT_STORAGE=s3 needs AWS_STORAGE_BUCKET_NAME")
        archive_location = "/".join(part for part in (location, "archive") if part)
        return {
            "default": {"BACKEND": S3_BACKEND, "OPTIONS": {"location": location}},
            "archive": {"BACKEND": S3_BACKEND, "OPTIONS": {"location": archive_location}},
            "staticfiles": STATIC,
        }
    raise ImproperlyConfigured(f"REPORT_STORAGE must be filesystem or s3, got {backend!r}")
