"""Example networks of your own, to copy: factories for ``memsched profile|run MODULE:FUNCTION``
(`models.network`), e.g. ``memsched run memsched.models.examples.my_network:build --budget 60%``."""
