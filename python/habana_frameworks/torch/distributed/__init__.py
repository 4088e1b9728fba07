"""habana_frameworks.torch.distributed: import `.hccl` to register the `hccl` backend."""
