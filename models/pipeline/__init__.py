"""memsched.models.pipeline: the PyTorch side of the pipeline problem."""
