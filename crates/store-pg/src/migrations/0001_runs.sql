-- Runs: one row per run (its queue entry, its lease, its end), and its journal, one row per
-- line exactly as the file journal holds it.
CREATE TABLE lsm_runs (
    run_id text PRIMARY KEY,
    agent text NOT NULL,
    topic text NOT NULL DEFAULT '',
    -- queued | running | completed | stopped | failed | cancelled
    status text NOT NULL,
    -- How to start the run (what `lsm runs submit` was given), for a worker.
    request jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    finished_at timestamptz,
    -- Who drives the run, and until when unless renewed.
    lease_owner text,
    lease_until timestamptz,
    -- How many times the run was taken (1 for a run that never changed hands).
    attempts integer NOT NULL DEFAULT 0,
    cancel_requested boolean NOT NULL DEFAULT false,
    -- The journal's last line.
    last_seq bigint NOT NULL DEFAULT 0,
    summary jsonb
);
CREATE INDEX lsm_runs_claimable ON lsm_runs (created_at) WHERE status IN ('queued', 'running');

CREATE TABLE lsm_run_events (
    run_id text NOT NULL REFERENCES lsm_runs (run_id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    line text NOT NULL,
    PRIMARY KEY (run_id, seq)
);
