"""The front: how a user asks for a crash test. The command line (`cli`), the one Python call
(`api.run_crash_test`), every option declared once (`options`), the hooks file a workflow's
code is read into (`scaffold`, `source`). The pytest plugin is `pytest_plugin`, beside it."""
