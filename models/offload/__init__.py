"""memsched.models.offload: the PyTorch side of the offload problem."""
