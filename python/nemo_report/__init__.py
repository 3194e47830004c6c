"""nemo-report: figures and one self-contained HTML page from nemo-bench JSON."""
__version__ = "0.1.0"
