"""The Scrapy-free core: host ranking, per-host queues, policies and estimates."""

from .estimates import CostParams, HostEstimate, Measurement, ProcessingCost, ewma
from .frontier import PLAIN_LANE, TwoLevelFrontier, memory_queue
from .hosts import Host, SessionRecord
from .interface import Frontier
from .policies import (
    BUILTIN_POLICIES,
    BindingCapability,
    BreadthFirst,
    CrawlCapability,
    PerformanceFirst,
    Policy,
    QualityFirst,
    ResourceCapability,
)
from .queues import FifoHostQueue, HostQueue, QualityHostQueue

__all__ = [
    "BUILTIN_POLICIES",
    "PLAIN_LANE",
    "BindingCapability",
    "BreadthFirst",
    "CostParams",
    "CrawlCapability",
    "FifoHostQueue",
    "Frontier",
    "Host",
    "HostEstimate",
    "HostQueue",
    "Measurement",
    "PerformanceFirst",
    "Policy",
    "ProcessingCost",
    "QualityFirst",
    "QualityHostQueue",
    "ResourceCapability",
    "SessionRecord",
    "TwoLevelFrontier",
    "ewma",
    "memory_queue",
]
