-- Agent memory: every scope in one table. Agent- and project-scope memories belong to one
-- project (the key the program gives: its agents folder), global ones ('' as project) to
-- every project on this schema.

-- Words are stemmed as in English, but no word is dropped as a stop word: which words of a
-- query count is the program's rule (the same for every memory store), not the dictionary's.
CREATE TEXT SEARCH DICTIONARY lsm_memory_stem (TEMPLATE = pg_catalog.snowball, LANGUAGE = english);
CREATE TEXT SEARCH CONFIGURATION lsm_memory (COPY = pg_catalog.english);
ALTER TEXT SEARCH CONFIGURATION lsm_memory ALTER MAPPING REPLACE english_stem WITH lsm_memory_stem;

-- The tags as words, for the search column (array_to_string is only stable in general; on a
-- text[] it is immutable).
CREATE FUNCTION lsm_memory_tag_words(tags text[]) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT array_to_string(tags, ' ') $$;

CREATE TABLE lsm_memories (
    -- `m-` and 16 hex digits.
    id text PRIMARY KEY,
    scope text NOT NULL CHECK (scope IN ('agent', 'project', 'global')),
    -- The project of an agent- or project-scope memory; '' for a global one.
    project text NOT NULL,
    -- The agent that wrote it; for agent scope, the only agent that sees it.
    owner_agent text NOT NULL,
    text text NOT NULL,
    -- Lower-case, in the order given.
    tags text[] NOT NULL DEFAULT '{}',
    source_run_id text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    expires_at timestamptz,
    status text NOT NULL CHECK (status IN ('candidate', 'approved')),
    -- The text weighs more than the tags.
    search tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('lsm_memory', text), 'A')
        || setweight(to_tsvector('lsm_memory', lsm_memory_tag_words(tags)), 'B')
    ) STORED
);
-- One memory per fact (case aside) per scope, project and agent: storing it again refreshes it.
CREATE UNIQUE INDEX lsm_memories_same_fact
    ON lsm_memories (scope, project, owner_agent, md5(lower(text)));
CREATE INDEX lsm_memories_search ON lsm_memories USING gin (search);
CREATE INDEX lsm_memories_reach ON lsm_memories (project, scope, owner_agent);
CREATE INDEX lsm_memories_expires_at ON lsm_memories (expires_at) WHERE expires_at IS NOT NULL;
