"""The runs, in the crash test's process: the front of the runs (`runner`), a cell's run
(`cell`, a reset's `reset_cell`) and the cells (`cells`), the server and the workers' processes
(`devserver`, `processes`, `forkserver`, `workers`, `session`), the user's drive (`drive`), and
what happens after a kill (`recovery`)."""
