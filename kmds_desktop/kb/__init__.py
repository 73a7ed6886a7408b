"""KMDS knowledge bases: read and write KMDS RDF/XML, plain records, the five template searches.

No Qt here. owlready2 is imported only when a file is loaded or saved, so importing this package
stays cheap for the CLI's ``--help``.
"""

from kmds_desktop.kb.knowledge_base import KnowledgeBase, kb_id_for, load_kb, new_kb, save_kb
from kmds_desktop.kb.model import KnowledgeBaseError, Observation, Workflow
from kmds_desktop.kb.templates import (
    TEMPLATES,
    SearchFilters,
    all_observations_search,
    data_representation_search,
    exploratory_search,
    model_selection_search,
    modelling_choice_search,
)
from kmds_desktop.kb.vocabulary import CATEGORIES, INTENTS, MAIN_CATEGORIES, OBSERVATION_TYPES, WORKFLOW_KINDS

__all__ = [
    "CATEGORIES",
    "INTENTS",
    "MAIN_CATEGORIES",
    "OBSERVATION_TYPES",
    "TEMPLATES",
    "WORKFLOW_KINDS",
    "KnowledgeBase",
    "KnowledgeBaseError",
    "Observation",
    "SearchFilters",
    "Workflow",
    "all_observations_search",
    "data_representation_search",
    "exploratory_search",
    "kb_id_for",
    "load_kb",
    "model_selection_search",
    "modelling_choice_search",
    "new_kb",
    "save_kb",
]
