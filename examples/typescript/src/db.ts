// The worker's one Postgres pool (DATABASE_URL), and each set of tables made once, by the first
// activity that needs it: a worker that runs only the notes needs no database. Workers starting
// at once take the tables' advisory lock, so that none races another on `create table`.
import { Pool } from 'pg';

let pool: Pool | undefined;
const made = new Map<string, Promise<void>>();

export async function withTables(lock: string, schema: string): Promise<Pool> {
  pool ??= new Pool({ connectionString: process.env.DATABASE_URL, max: 4 });
  let ready = made.get(lock);
  if (ready === undefined) {
    ready = create(pool, lock, schema);
    made.set(lock, ready);
  }
  await ready;
  return pool;
}

async function create(pool: Pool, lock: string, schema: string): Promise<void> {
  const conn = await pool.connect();
  try {
    await conn.query('begin');
    await conn.query('select pg_advisory_xact_lock(hashtext($1))', [lock]);
    await conn.query(schema);
    await conn.query('commit');
  } finally {
    conn.release();
  }
}
