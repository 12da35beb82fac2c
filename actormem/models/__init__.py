"""Chat models and embedders (each adapter in its own module, imported on use)."""

from actormem.logs import _configure_default

_configure_default()  # quiet logging unless the application configured structlog
