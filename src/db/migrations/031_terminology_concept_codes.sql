-- The code of each concept read from its index alone: `:below`, `:above` and is-a expansions turn closure rows into
-- codes (then into search-index hashes), and a heap visit per concept was most of their cost at 300,000 concepts
-- (docs/benchmarks.md "Terminology").
CREATE INDEX term_concepts_cid_code ON term_concepts (cid) INCLUDE (code);
