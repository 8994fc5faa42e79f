"""memsched.models.graph: the PyTorch side of the graph problem."""
