-- Terminology (docs/fhir.md "Terminology"): code systems, value sets and concept maps loaded by `pont terminology
-- load`, beside the FHIR store. No patient data. Each loaded version is a row of its own: a load writes a new row in
-- state 'loading' with its concepts, hierarchy and closure, then switches it to 'active' in one transaction (the
-- version it replaces goes in that transaction), so a reader sees the old version or the new one, never half of one.
-- A url answers with its newest active version unless a version is asked for.
CREATE TABLE term_code_systems (
  id                bigserial   PRIMARY KEY,
  url               text        NOT NULL,
  version           text        NOT NULL DEFAULT '', -- '' when the CodeSystem gives none
  resource_id       text        NOT NULL,            -- the FHIR id: CodeSystem/{id}/$lookup
  state             text        NOT NULL CHECK (state IN ('loading', 'active', 'retired')),
  content           text        NOT NULL,            -- complete | fragment | example | not-present | supplement
  resource          jsonb       NOT NULL,            -- the CodeSystem without its concepts
  concept_count     integer     NOT NULL DEFAULT 0,
  loaded_at         timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX term_code_systems_version ON term_code_systems (url, version) WHERE state = 'active';
CREATE INDEX term_code_systems_resource_id ON term_code_systems (resource_id) WHERE state = 'active';

CREATE TABLE term_concepts (
  cid          bigserial PRIMARY KEY,
  cs           bigint    NOT NULL REFERENCES term_code_systems (id) ON DELETE CASCADE,
  code         text      NOT NULL,
  display      text,
  display_norm text,      -- lower case, accents removed: $expand's filter
  definition   text,
  active       boolean   NOT NULL DEFAULT true,
  properties   jsonb,     -- [{code, value[x]}], parent and child excepted (they are term_edges)
  designations jsonb,     -- CodeSystem.concept.designation
  UNIQUE (cs, code)
);
CREATE INDEX term_concepts_code ON term_concepts (code);
CREATE INDEX term_concepts_display ON term_concepts (cs, display_norm text_pattern_ops);

-- The is-a hierarchy as loaded (nesting, parent/child properties, SNOMED CT "is a"): parent above child.
CREATE TABLE term_edges (
  parent bigint NOT NULL,
  child  bigint NOT NULL,
  PRIMARY KEY (parent, child)
);
CREATE INDEX term_edges_child ON term_edges (child, parent);
-- Edges by code while a load streams its concepts (a child may come before its parent); resolved to term_edges at its end.
CREATE TABLE term_edge_load (
  cs          bigint NOT NULL REFERENCES term_code_systems (id) ON DELETE CASCADE,
  parent_code text   NOT NULL,
  child_code  text   NOT NULL
);
CREATE INDEX term_edge_load_cs ON term_edge_load (cs);

-- The transitive closure of term_edges, each concept its own ancestor (depth 0): `:below`, `:above`, is-a,
-- descendent-of and $subsumes are one indexed lookup here. Kept by the load, never per request.
CREATE TABLE term_closure (
  ancestor   bigint   NOT NULL,
  descendant bigint   NOT NULL,
  PRIMARY KEY (ancestor, descendant)
);
CREATE INDEX term_closure_descendant ON term_closure (descendant, ancestor);

CREATE TABLE term_value_sets (
  id          bigserial   PRIMARY KEY,
  url         text        NOT NULL,
  version     text        NOT NULL DEFAULT '',
  resource_id text        NOT NULL,
  state       text        NOT NULL CHECK (state IN ('loading', 'active', 'retired')),
  resource    jsonb       NOT NULL,
  -- The expansion below is of the code systems active when it was made; NULL: expanded, otherwise why it cannot
  -- be (a code system it draws on is not loaded). Made again whenever one of those code systems is loaded.
  unexpandable text,
  depends     text[]      NOT NULL DEFAULT '{}', -- the code system and value set urls its compose names
  code_count  integer     NOT NULL DEFAULT 0,
  loaded_at   timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX term_value_sets_version ON term_value_sets (url, version) WHERE state = 'active';
CREATE INDEX term_value_sets_resource_id ON term_value_sets (resource_id) WHERE state = 'active';

-- Each value set's expansion, in order (`ord`): `:in`, `:not-in`, $expand and $validate-code read it.
CREATE TABLE term_value_set_codes (
  vs           bigint  NOT NULL REFERENCES term_value_sets (id) ON DELETE CASCADE,
  ord          integer NOT NULL,
  system       text    NOT NULL,
  version      text,
  code         text    NOT NULL,
  display      text,
  display_norm text,
  inactive     boolean NOT NULL DEFAULT false,
  PRIMARY KEY (vs, ord)
);
CREATE UNIQUE INDEX term_value_set_codes_code ON term_value_set_codes (vs, system, code);

CREATE TABLE term_concept_maps (
  id          bigserial   PRIMARY KEY,
  url         text        NOT NULL,
  version     text        NOT NULL DEFAULT '',
  resource_id text        NOT NULL,
  state       text        NOT NULL CHECK (state IN ('loading', 'active', 'retired')),
  resource    jsonb       NOT NULL,
  loaded_at   timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX term_concept_maps_version ON term_concept_maps (url, version) WHERE state = 'active';
CREATE INDEX term_concept_maps_resource_id ON term_concept_maps (resource_id) WHERE state = 'active';

CREATE TABLE term_concept_map_elements (
  cm            bigint  NOT NULL REFERENCES term_concept_maps (id) ON DELETE CASCADE,
  ord           integer NOT NULL,
  source_system text    NOT NULL,
  source_code   text    NOT NULL,
  target_system text,
  target_code   text,
  target_display text,
  equivalence   text    NOT NULL,
  comment       text,
  PRIMARY KEY (cm, ord)
);
CREATE INDEX term_concept_map_elements_source ON term_concept_map_elements (source_code, source_system);

-- hashKey(type, param, system, code) of src/core/hash.ts in SQL: the search index's hash_sys_value of a coding,
-- so `:below` and `:in` find index rows through their hash index from the closure and the expansions.
CREATE FUNCTION pont_token_hash(resource_type text, param text, system text, code text) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  h text := md5(convert_to(resource_type, 'UTF8') || '\x00'::bytea || convert_to(param, 'UTF8') || '\x00'::bytea ||
                convert_to(system, 'UTF8') || '\x00'::bytea || convert_to(code, 'UTF8'));
BEGIN
  -- The first 8 bytes of the md5, read little-endian as a signed 64-bit integer (readBigInt64LE).
  RETURN ('x' || substr(h, 15, 2) || substr(h, 13, 2) || substr(h, 11, 2) || substr(h, 9, 2) ||
          substr(h, 7, 2) || substr(h, 5, 2) || substr(h, 3, 2) || substr(h, 1, 2))::bit(64)::bigint;
END $$;
