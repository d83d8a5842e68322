"""vitprof: exact parameter and MAC accounting for Vision Transformers, per component.

MACs are the primary unit (one multiply-accumulate of a matmul, linear, convolution or
attention product); FLOPs = 2 x MACs; element-wise work is counted apart as vector FLOPs.
"""

from vitprof.analysis import analyze
from vitprof.errors import UserError
from vitprof.records import Component, Counts
from vitprof.result import Profile

__all__ = ["Component", "Counts", "Profile", "UserError", "analyze"]
__version__ = "0.1.0"
