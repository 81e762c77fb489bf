-- The grocer's own tables, in a schema of their own. Applied at every start; idempotent.
create schema if not exists grocer;

create table if not exists grocer.orders (
    id         bigserial primary key,
    reference  text not null,          -- the client's own id for what it ordered
    lines      jsonb not null,
    created_at timestamptz not null default now()
);
create index if not exists orders_reference on grocer.orders (reference);
-- Every order belongs to the account whose key placed it; only that account finds it.
alter table grocer.orders add column if not exists account text not null default 'default';
create index if not exists orders_account_reference on grocer.orders (account, reference);

-- An idempotency key is remembered for the TTL after its first use, then forgotten.
create table if not exists grocer.idempotency_keys (
    key          text primary key,     -- ACCOUNT/KEY: a key is the account's own
    request_hash text not null,        -- what the key was first used for
    order_id     bigint not null references grocer.orders (id),
    created_at   timestamptz not null default now()
);
