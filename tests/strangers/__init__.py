"""ViTs written as a stranger would: one small file per style, every module, parameter and class
given a neutral name (``a``, ``b``, ``w0``, ``m1``, ...), so that nothing but the computation
tells vitprof what a module is. Their closed-form breakdowns are in tests/test_strangers.py.

The shared pieces are in :mod:`strangers.parts`: a 1x3x16x16 image cut into 4x4 tiles (N = 16
tiles of 3*4*4 = 48 values), width D = 32, 4 heads of 8, feed-forward width F = 64, 10 classes.
"""
