"""Public geometry: built without looking at the data."""

from .domain import BallDomain, BoxDomain, Domain, PrivacyLeakWarning, fold, make_domain
from .init import sphere_packing

__all__ = ["BallDomain", "BoxDomain", "Domain", "PrivacyLeakWarning", "fold", "make_domain", "sphere_packing"]
