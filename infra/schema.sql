-- Applied idempotently at every start (infra.db.ensure_schema); safe to run any number of times.

-- The journal baseline's run registry: one row per run, whichever design ran it.
create table if not exists agent_runs (
    run_id      text primary key,
    design      text not null,
    household   text not null,
    status      text not null default 'running',   -- running | completed
    result      jsonb,                              -- the final step's output
    started_at  timestamptz not null default now(),
    finished_at timestamptz
);

-- The journal: one row per finished step. Loaded whole, in one query, when a run starts.
create table if not exists agent_steps (
    run_id     text not null,
    step       int  not null,
    name       text not null,
    output     jsonb not null,
    created_at timestamptz not null default now(),
    primary key (run_id, step)
);

-- Side effects. A non-null idempotency_key may appear once: a retry with the same key finds the
-- existing row instead of creating a second one. Null keys (the weaker designs) never conflict.
create table if not exists orders (
    id              bigserial primary key,
    run_id          text not null,
    items           jsonb not null,
    idempotency_key text unique,
    created_at      timestamptz not null default now()
);
create index if not exists orders_run_id on orders (run_id);

create table if not exists emails (
    id              bigserial primary key,
    run_id          text not null,
    recipient       text not null,
    subject         text not null,
    body            text not null,
    idempotency_key text unique,
    created_at      timestamptz not null default now()
);
create index if not exists emails_run_id on emails (run_id);

-- Every model call, recorded before the caller sees the answer. A model call costs money, so it
-- takes an idempotency key too: a retry with the same key reuses the recorded answer.
create table if not exists model_calls (
    id              bigserial primary key,
    run_id          text not null,
    step            int  not null,
    prompt          text not null,
    response        jsonb not null,
    idempotency_key text unique,
    created_at      timestamptz not null default now()
);
create index if not exists model_calls_run_id on model_calls (run_id);
