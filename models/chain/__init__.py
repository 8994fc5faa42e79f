"""memsched.models.chain: the PyTorch side of the chain problem."""
