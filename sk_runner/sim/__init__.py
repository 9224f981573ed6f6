"""The simulated SuperKernel device: a workload process that behaves like an
Ascend SK model and writes every artifact in the real formats (docs/simulator.md)."""
