"""The KMDS schema as triples, so a new or older KB file can be completed before it is written.

KMDS reads a file by looking up its classes and properties by name, so a saved file must declare
every class and property its individuals use. Older files (and the bare 0.4.2 schema) lack some
declarations (``intent``, the ``has_*`` links); the writer adds the missing ones from this table.
"""

from __future__ import annotations

from kmds_desktop.kb.vocabulary import (
    CATEGORY_CLASS,
    CATEGORY_LINK_PROPERTY,
    CATEGORY_TYPE_PROPERTY,
    DEPENDS_ON,
    DESCRIPTION,
    FINDING,
    FINDING_SEQUENCE,
    INTENT,
    KM_OBSERVATION,
    KMDS_NS,
    OWL_NS,
    RDF_NS,
    RDFS_NS,
    WORKFLOW_CLASS,
    XSD_NS,
)

RDF_TYPE = RDF_NS + "type"
SUBCLASS_OF = RDFS_NS + "subClassOf"
DOMAIN = RDFS_NS + "domain"
RANGE = RDFS_NS + "range"
OWL_CLASS = OWL_NS + "Class"
OWL_THING = OWL_NS + "Thing"
OBJECT_PROPERTY = OWL_NS + "ObjectProperty"
DATATYPE_PROPERTY = OWL_NS + "DatatypeProperty"
FUNCTIONAL_PROPERTY = OWL_NS + "FunctionalProperty"
NAMED_INDIVIDUAL = OWL_NS + "NamedIndividual"
XSD_STRING = XSD_NS + "string"
XSD_INTEGER = XSD_NS + "integer"

#: class local name -> parent local names ("Thing" = owl:Thing), as KMDS 0.4.2 declares them.
_CLASS_PARENTS: dict[str, tuple[str, ...]] = {
    WORKFLOW_CLASS: ("Thing",),
    "KnowledgeApplicationWorkflow": ("Thing", WORKFLOW_CLASS),
    "KnowledgeExtractionExperimentationWorkflow": ("Thing", WORKFLOW_CLASS),
    KM_OBSERVATION: ("Thing",),
    "ExploratoryObservation": ("Thing", KM_OBSERVATION),
    "DataRepresentationObservation": (KM_OBSERVATION,),
    "ModellingChoiceObservation": ("Thing", KM_OBSERVATION),
    "ModelSelectionObservation": ("Thing",),
    "ExperimentalObservation": ("Thing",),
    "PerformanceMeasure": ("Thing",),
}


def _ref(name: str) -> str:
    return OWL_THING if name == "Thing" else KMDS_NS + name


def schema_triples() -> list[tuple[str, str, str]]:
    """Every declaration a KMDS file needs, as (subject, predicate, object) IRIs."""
    triples: list[tuple[str, str, str]] = []
    for cls, parents in _CLASS_PARENTS.items():
        triples.append((_ref(cls), RDF_TYPE, OWL_CLASS))
        triples.extend((_ref(cls), SUBCLASS_OF, _ref(parent)) for parent in parents)
    for category, link in CATEGORY_LINK_PROPERTY.items():
        triples += [
            (KMDS_NS + link, RDF_TYPE, OBJECT_PROPERTY),
            (KMDS_NS + link, DOMAIN, _ref(WORKFLOW_CLASS)),
            (KMDS_NS + link, RANGE, _ref(CATEGORY_CLASS[category])),
        ]
    triples += [
        (KMDS_NS + DEPENDS_ON, RDF_TYPE, OBJECT_PROPERTY),
        (KMDS_NS + DEPENDS_ON, DOMAIN, _ref(WORKFLOW_CLASS)),
        (KMDS_NS + DEPENDS_ON, RANGE, _ref("KnowledgeExtractionExperimentationWorkflow")),
    ]
    datatype_props: list[tuple[str, str | None, str]] = [
        (DESCRIPTION, WORKFLOW_CLASS, XSD_STRING),
        ("name", WORKFLOW_CLASS, XSD_STRING),
        *((prop, CATEGORY_CLASS[cat], XSD_STRING) for cat, prop in CATEGORY_TYPE_PROPERTY.items()),
        (FINDING, None, XSD_STRING),
        (FINDING_SEQUENCE, None, XSD_INTEGER),
        (INTENT, KM_OBSERVATION, XSD_STRING),
    ]
    for prop, domain, rng in datatype_props:
        iri = KMDS_NS + prop
        triples += [(iri, RDF_TYPE, DATATYPE_PROPERTY), (iri, RDF_TYPE, FUNCTIONAL_PROPERTY)]
        if domain:
            triples.append((iri, DOMAIN, _ref(domain)))
        triples.append((iri, RANGE, rng))
    return triples
