"""Log filters named in settings.LOGGING."""
import logging

from django.core.exceptions import PermissionDenied


class PermissionDeniedOneLine(logging.Filter):
    """A refused request (PermissionDenied, a 403) is an ordinary event, not a fault: Django logs it
    with the exception's traceback, which buried real errors in the log. Keep one line — the path
    and the refusal's reason — and drop the traceback. The 403 page itself is unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, PermissionDenied):
            record.exc_info = None
            record.exc_text = None
            reason = str(exc).replace("\n", " ").strip()
            if reason and isinstance(record.args, tuple):
                record.msg = f"{record.msg} (%s)"
                record.args = (*record.args, reason)
        return True
