"""Empty in the bridge too; the backend lives in habana_frameworks.torch.distributed.hccl."""
