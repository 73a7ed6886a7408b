"""The KMDS vocabulary: namespace, class and property names, observation categories and type labels.

Kept in one table-like module because the reader, the writer, the schema and the synthetic
generator must agree on every name; KMDS files are only interoperable if the exact spellings
(including the historical ``has_modeling_choice_observations``) are reused everywhere.
"""

from __future__ import annotations

KMDS_NS = "http://test.org/kmds/kmds.owl#"
#: The ontology IRI KMDS writes (``xml:base`` of its files).
KMDS_ONTOLOGY_IRI = "http://test.org/kmds/kmds.owl"

RDF_NS = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS_NS = "http://www.w3.org/2000/01/rdf-schema#"
OWL_NS = "http://www.w3.org/2002/07/owl#"
XSD_NS = "http://www.w3.org/2001/XMLSchema#"

#: Observation categories, in display order (the order the KB browser and the templates use).
CATEGORIES: tuple[str, ...] = (
    "exploratory",
    "data_representation",
    "modelling_choice",
    "model_selection",
    "experimental",
)

#: The four categories every KMDS workflow normally records (the fifth is rarely used).
MAIN_CATEGORIES: tuple[str, ...] = CATEGORIES[:4]

#: category -> OWL class local name.
CATEGORY_CLASS: dict[str, str] = {
    "exploratory": "ExploratoryObservation",
    "data_representation": "DataRepresentationObservation",
    "modelling_choice": "ModellingChoiceObservation",
    "model_selection": "ModelSelectionObservation",
    "experimental": "ExperimentalObservation",
}
CLASS_CATEGORY: dict[str, str] = {cls: cat for cat, cls in CATEGORY_CLASS.items()}

#: category -> datatype property holding the observation-type label.
CATEGORY_TYPE_PROPERTY: dict[str, str] = {
    "exploratory": "exploratory_observation_type",
    "data_representation": "data_representation_observation_type",
    "modelling_choice": "modelling_choice_observation_type",
    "model_selection": "model_selection_observation_type",
    "experimental": "experimental_observation_type",
}
TYPE_PROPERTY_CATEGORY: dict[str, str] = {p: c for c, p in CATEGORY_TYPE_PROPERTY.items()}

#: category -> workflow-to-observation link property (note KMDS's "modeling" spelling).
CATEGORY_LINK_PROPERTY: dict[str, str] = {
    "exploratory": "has_exploratory_observations",
    "data_representation": "has_data_representation_observations",
    "modelling_choice": "has_modeling_choice_observations",
    "model_selection": "has_model_selection_observations",
    "experimental": "has_experimental_observations",
}
LINK_PROPERTY_CATEGORY: dict[str, str] = {p: c for c, p in CATEGORY_LINK_PROPERTY.items()}

#: The observation-type labels KMDS offers per category (first one is the default).
OBSERVATION_TYPES: dict[str, tuple[str, ...]] = {
    "exploratory": ("Relevance Observation", "Data Quality Observation"),
    "data_representation": ("Feature Engineering Observation", "Data Transformation Observation"),
    "modelling_choice": ("Modelling Choice Observation", "Modelling Assumption Observation"),
    "model_selection": (
        "Model Selection Statement",
        "Model Selection Setup Description",
        "Model Selection Observation",
        "Model Selection Result Summary",
    ),
    "experimental": ("Experimental Observation",),
}

#: Intent values seen in KMDS files (free text is allowed too; these feed pickers).
INTENTS: tuple[str, ...] = (
    "DATA_UNDERSTANDING",
    "FEATURE_ASSESSMENT",
    "DATA_HETEROGENEITY_ASSESSMENT",
    "MODEL_EXPLANATION",
    "MODEL_SELECTION",
)

WORKFLOW_CLASS = "Workflow"
#: Workflow kinds (OWL class local names); the first is the default for new workflows.
WORKFLOW_KINDS: tuple[str, ...] = (
    "KnowledgeExtractionExperimentationWorkflow",
    "KnowledgeApplicationWorkflow",
    "Workflow",
)

FINDING = "finding"
FINDING_SEQUENCE = "finding_sequence"
INTENT = "intent"
DESCRIPTION = "description"
DEPENDS_ON = "depends_on"
KM_OBSERVATION = "KMObservation"


def local_name(iri: str) -> str:
    """The part after ``#`` (or the last ``/``): KMDS uses it as the display name."""
    if "#" in iri:
        return iri.rsplit("#", 1)[1]
    return iri.rstrip("/").rsplit("/", 1)[-1]
