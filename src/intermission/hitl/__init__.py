"""Human-in-the-loop tool approval: the interceptor and the HITL helpers."""

from .api import HITL
from .graph import ApprovalKeys, decide_graph
from .interceptor import HITLInterceptor, Policy

__all__ = ["HITL", "ApprovalKeys", "HITLInterceptor", "Policy", "decide_graph"]
