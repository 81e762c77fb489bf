"""After the kill, in one place: waiting for the run or the worker's end (`waiting`), the kill
recorded and what the recovery waited on (`kills`), the dead worker's attempts and sticky queue
fast-forwarded (`fastforward`), and a run's progress watched (`polling`)."""
