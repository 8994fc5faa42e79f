"""memsched.models.join: the PyTorch side of the join problem."""
