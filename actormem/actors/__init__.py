"""The memory actors (pykka): short-term memory, AutoContext, the recorder."""

from actormem.logs import _configure_default

_configure_default()  # quiet logging unless the application configured structlog
