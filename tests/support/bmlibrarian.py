"""BMLibrarian's ``sources`` and ``document`` tables, as its baseline schema makes them (the columns the
app reads and writes; ``search_vector`` generated from title (weight A) and abstract (weight B))."""

BMLIBRARIAN_TABLES = """
CREATE TABLE sources (id serial PRIMARY KEY, name text UNIQUE NOT NULL, url text, is_reputable boolean,
                      is_free boolean);
CREATE TABLE document (
  id serial PRIMARY KEY, source_id integer REFERENCES sources(id), external_id text NOT NULL, doi text,
  title text, abstract text, category_id integer, keywords text[], augmented_keywords text[],
  mesh_terms text[], authors text[], publication text, publication_date date, url text, pdf_url text,
  pdf_filename text, full_text text,
  added_date timestamp without time zone DEFAULT CURRENT_TIMESTAMP,
  updated_date timestamp without time zone DEFAULT CURRENT_TIMESTAMP,
  withdrawn_date timestamp without time zone, withdrawn_reason text,
  search_vector tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english', coalesce(title,'')),'A') ||
    setweight(to_tsvector('english', coalesce(abstract,'')),'B')) STORED,
  CONSTRAINT document_source_id_external_id_key UNIQUE (source_id, external_id));
CREATE INDEX idx_document_search_vector ON document USING gin (search_vector);
"""
