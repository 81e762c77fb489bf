"""The grocery agent on DBOS: a DBOS workflow over the same six step functions."""
