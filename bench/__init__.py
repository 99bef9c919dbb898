"""morgana's GPU benchmark: `python3 -m bench prepare|run|selftest` (bench/README.md).

prepare (any machine with NVRTC): search each spec with `morgana optimize`, keep its top candidates, compile the
best, the plain spec and each candidate into bundles, write a manifest. run (a GPU machine with PyTorch): check
and time every bundle and the PyTorch baselines derived from the spec (eager, torch.compile, SDPA) under one
protocol, print a markdown table, write JSON. selftest (CPU): the spec reader and its PyTorch translation against
`morgana check`/`morgana eval` and hand-computed values."""
