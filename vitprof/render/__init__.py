"""Rendering finished results: tables in every output format, JSON schemas, figures and the
markdown pages. Renderers take computed results and never count.
"""
