"""memsched experiments: the command line, sweeps, benchmarks and figures."""
