"""The package version, read by hatchling and by ambient_runs.__version__."""

__all__ = ("__version__",)

__version__ = "0.1.0"
