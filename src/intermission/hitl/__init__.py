"""Human-in-the-loop tool approval: the interceptor and the HITL helpers."""

from .api import HITL
from .interceptor import HITLInterceptor, Policy

__all__ = ["HITL", "HITLInterceptor", "Policy"]
