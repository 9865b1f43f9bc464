"""An app's settings: :class:`Settings` and :func:`load_settings`
(:mod:`~aiostreams.settings.config`: keywords, the environment, files), the engine's share of
them (:mod:`~aiostreams.settings.engine`) and the Kafka clients' options
(:mod:`~aiostreams.settings.client_options`)."""

from aiostreams.settings.config import Settings, load_settings

__all__ = ["Settings", "load_settings"]
