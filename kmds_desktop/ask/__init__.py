"""Ask the knowledge base: the search orchestrator (route -> template or semantic -> answer).

``from kmds_desktop.ask import SearchOrchestrator, OrchestratorResult, OrchestratorRoute,
SearchFilters`` (also re-exported by :mod:`kmds_desktop.search`, like KMDS's search module).
"""

from kmds_desktop.ask.models import INTENT_CLASSES, IntentClass, OrchestratorResult, OrchestratorRoute
from kmds_desktop.ask.orchestrator import AnswerStream, SearchOrchestrator
from kmds_desktop.ask.routing import RouteError, parse_route, routing_prompt
from kmds_desktop.kb import SearchFilters

__all__ = [
    "INTENT_CLASSES",
    "AnswerStream",
    "IntentClass",
    "OrchestratorResult",
    "OrchestratorRoute",
    "RouteError",
    "SearchFilters",
    "SearchOrchestrator",
    "parse_route",
    "routing_prompt",
]
