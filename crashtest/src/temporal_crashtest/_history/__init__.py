"""What a run's histories say, read after it ran: the tree of runs and its boundaries (`tree`),
what a recovery waited on in production (`waits`), the marks a loaded machine leaves (`load`),
when a pending attempt would have ended (`attempts`), each run's timeline (`timeline`), and what
a deploy changes that no run fails on (`hazards`)."""
