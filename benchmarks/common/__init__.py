"""What the benchmarks share: the machine and its timed processes, fresh-process probes, matmul peaks,
a sweep with synthetic records, and a training configuration timed as a whole process.
"""
