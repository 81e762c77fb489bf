"""One workflow type, `Order`, in three versions, for deploy crash tests (`--deploy-to`): a run
started on one version is killed and taken over by a worker of another.

- `v1`: charge, then send the receipt.
- `v2`: a notice inserted between them, without a patch: a run that had scheduled the receipt
  when v1's worker died meets a nondeterminism error on v2 and is blocked.
- `v2_patched`: the same notice behind `workflow.patched`: a run in flight keeps v1's path, a new
  one takes v2's.

Every version keys its effects (`workflow_id:activity_id`); what differs is only the code path.
"""
