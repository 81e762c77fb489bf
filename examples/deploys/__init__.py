"""One workflow type, `Order`, in several versions, for deploy crash tests (`--deploy-to`): a run
started on one version is killed and taken over by a worker of another.

- `v1`: charge, then send the receipt.
- `v2`: a notice inserted between them, without a patch: a run that had scheduled the receipt
  when v1's worker died meets a nondeterminism error on v2 and is blocked.
- `v2_patched`: the same notice behind `workflow.patched`: a run in flight keeps v1's path, a new
  one takes v2's.
- `v3_deprecated`, `v4_removed`: the later stages of Temporal's versioning guide (the patch
  deprecated, then removed), each right after the one before it and wrong after the one before
  that.
- `removed`, `removed_patched`: the receipt removed, without and with a patch.
- `generic_v1` → `generic_v2`: one activity type for every step; `v2_input`: an input changed;
  `ids_v1` → `ids_v2_patched`: an explicit activity id per step.

`pairs.PAIRS` lists the deploys between them and the verdict each must get; `python -m
examples.deploys` crash-tests them all and prints the table.

Every version keys its effects (`workflow_id:activity_id`); what differs is only the code path.
"""
