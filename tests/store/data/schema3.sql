-- The tables of an actormem DuckDB store at schema version 3 (as actormem
-- created them before tags and source ids left their LIST columns), used by
-- tests/store/test_store_migration.py to build filled schema-3 files.
-- {dim} is replaced by the embedding dimension.
CREATE TABLE memories (
    id VARCHAR PRIMARY KEY,
    user_id VARCHAR NOT NULL DEFAULT '',
    agent_id VARCHAR NOT NULL DEFAULT '',
    run_id VARCHAR NOT NULL DEFAULT '',
    session_id VARCHAR NOT NULL DEFAULT '',
    kind VARCHAR NOT NULL,
    content VARCHAR NOT NULL,
    content_hash VARCHAR NOT NULL,
    embedding FLOAT[{dim}],
    importance DOUBLE NOT NULL,
    tags VARCHAR[] NOT NULL DEFAULT [],
    source_ids VARCHAR[] NOT NULL DEFAULT [],
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    last_accessed TIMESTAMP NOT NULL,
    access_count BIGINT NOT NULL DEFAULT 0,
    superseded_by VARCHAR,
    deleted_at TIMESTAMP,
    metadata JSON NOT NULL DEFAULT '{}'
);
CREATE TABLE history (
    id VARCHAR NOT NULL,
    memory_id VARCHAR NOT NULL,
    user_id VARCHAR NOT NULL DEFAULT '',
    agent_id VARCHAR NOT NULL DEFAULT '',
    run_id VARCHAR NOT NULL DEFAULT '',
    session_id VARCHAR NOT NULL DEFAULT '',
    op VARCHAR NOT NULL,
    old_content VARCHAR,
    new_content VARCHAR,
    ts TIMESTAMP NOT NULL,
    reason VARCHAR NOT NULL DEFAULT ''
);
CREATE TABLE store_meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);
CREATE TABLE schema_version (
    version INTEGER NOT NULL,
    applied_at TIMESTAMP NOT NULL DEFAULT current_timestamp
);
CREATE TABLE activity_log (
    id VARCHAR PRIMARY KEY,
    user_id VARCHAR NOT NULL DEFAULT '',
    agent_id VARCHAR NOT NULL DEFAULT '',
    run_id VARCHAR NOT NULL DEFAULT '',
    session_id VARCHAR NOT NULL DEFAULT '',
    seq BIGINT NOT NULL,
    ts TIMESTAMP NOT NULL,
    entry_type VARCHAR NOT NULL,
    content VARCHAR NOT NULL,
    metadata JSON NOT NULL DEFAULT '{}',
    compaction_id VARCHAR
);
CREATE TABLE log_compactions (
    id VARCHAR PRIMARY KEY,
    user_id VARCHAR NOT NULL DEFAULT '',
    agent_id VARCHAR NOT NULL DEFAULT '',
    run_id VARCHAR NOT NULL DEFAULT '',
    session_id VARCHAR NOT NULL DEFAULT '',
    ts TIMESTAMP NOT NULL,
    entries BIGINT NOT NULL,
    first_seq BIGINT NOT NULL,
    last_seq BIGINT NOT NULL,
    summary_id VARCHAR NOT NULL,
    summary VARCHAR NOT NULL,
    summarizer VARCHAR NOT NULL DEFAULT '',
    bytes_before BIGINT NOT NULL DEFAULT 0,
    bytes_after BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE journal_state (
    user_id VARCHAR NOT NULL DEFAULT '',
    agent_id VARCHAR NOT NULL DEFAULT '',
    run_id VARCHAR NOT NULL DEFAULT '',
    session_id VARCHAR NOT NULL DEFAULT '',
    key VARCHAR NOT NULL,
    value VARCHAR NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    PRIMARY KEY (user_id, agent_id, run_id, session_id, key)
);
INSERT INTO schema_version (version) VALUES (1), (2), (3);
