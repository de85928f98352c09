"""
Integrations with other libraries, one module each, every one an optional extra.

``import ambient_runs`` never imports anything here; importing an adapter whose
library is not installed raises `ImportError` naming the extra to install
(``pip install 'ambient-runs[otel]'``, for example).
"""

__all__: list[str] = []
