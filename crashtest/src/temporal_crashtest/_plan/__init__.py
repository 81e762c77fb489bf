"""The plan: what is crash-tested (`target`), the run without a crash every cell is compared with
and the crash points resolved against it (`reference`), how two states differ (`compare`), which
points share a run (`groups`), and a shard's share of them (`shards`)."""
