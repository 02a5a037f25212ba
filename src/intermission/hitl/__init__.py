"""Human-in-the-loop tool approval: the interceptor and the HITL helpers."""

from .api import HITL
from .deadlines import check_deadline
from .graph import ApprovalKeys, approval_deadline, decide_graph, expire_approval, open_approval
from .interceptor import HITLInterceptor, Policy

__all__ = [
    "HITL",
    "ApprovalKeys",
    "HITLInterceptor",
    "Policy",
    "approval_deadline",
    "check_deadline",
    "decide_graph",
    "expire_approval",
    "open_approval",
]
